//! `palisade compile --target nftables`.

use crate::error::CliError;

/// Compiles to an nftables ruleset.
pub fn run(_args: &super::compile::Args) -> Result<(), CliError> {
    Err(CliError::Failed(
        "the nftables target is not built yet".into(),
    ))
}
