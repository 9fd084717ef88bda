//! `palisade explain`.

use std::io::Write;

use crate::common::{FlowArgs, Input};
use crate::error::CliError;

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    flow: FlowArgs,
}

/// Prints the tier-by-tier walk.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let flow = args.flow.flow(&engine)?;
    std::io::stdout().write_all(engine.explain(&flow).as_bytes())?;
    Ok(())
}
