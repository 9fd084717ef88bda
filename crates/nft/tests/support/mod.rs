pub mod ct;
