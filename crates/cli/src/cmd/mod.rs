//! One module per subcommand: arguments, then one call into the libraries.

pub mod agent;
pub mod compile;
pub mod compile_neutron;
pub mod compile_nftables;
pub mod eval;
pub mod explain;
pub mod generate;
pub mod lab;
pub mod matrix;
pub mod tenancy;
