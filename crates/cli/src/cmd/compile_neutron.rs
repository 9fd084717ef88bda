//! `palisade compile --target neutron`.

use crate::error::CliError;

/// Neutron-specific flags of `compile`.
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {}

/// Compiles to Neutron security groups.
pub fn run(_args: &super::compile::Args) -> Result<(), CliError> {
    Err(CliError::Failed(
        "the neutron target is not built yet".into(),
    ))
}
