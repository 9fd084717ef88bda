//! `palisade diff`.
use crate::error::CliError;
/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct Args {}
/// Not yet.
pub fn run(_args: Args) -> Result<(), CliError> {
    Err(CliError::Differs)
}
