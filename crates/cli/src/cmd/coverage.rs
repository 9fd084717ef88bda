//! `palisade coverage`.
use crate::error::CliError;
/// Arguments of `coverage`.
#[derive(Debug, clap::Args)]
pub struct Args {}
/// Not yet.
pub fn run(_args: Args) -> Result<(), CliError> {
    Err(CliError::Usage(String::new()))
}
