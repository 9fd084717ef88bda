//! One module per subcommand: arguments, then one call into the libraries.

pub mod agent;
pub mod compile;
pub mod compile_neutron;
pub mod compile_nftables;
pub mod coverage;
pub mod diff;
pub mod eval;
pub mod explain;
pub mod generate;
pub mod lab;
pub mod lint;
pub mod matrix;
pub mod neutron;
pub mod tenancy;
