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
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
}

/// `explain` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// The tier-by-tier walk of both sides.
    Text,
    /// The verdict's JSON form plus `walk`: the tiers each side went through.
    Json,
}

/// Prints the tier-by-tier walk.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let flow = args.flow.flow(&engine)?;
    let explanation = engine.explain(&flow);
    let mut out = std::io::stdout().lock();
    match args.output {
        Format::Text => write!(out, "{explanation}")?,
        Format::Json => writeln!(out, "{}", serde_json::to_string(&explanation)?)?,
    }
    Ok(())
}
