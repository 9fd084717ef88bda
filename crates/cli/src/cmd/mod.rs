//! One module per subcommand: arguments, then one call into the libraries.

pub mod eval;
pub mod explain;
pub mod matrix;
