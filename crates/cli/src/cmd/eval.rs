//! `palisade eval`.

use std::io::Write;

use crate::common::{FlowArgs, Input};
use crate::error::CliError;

/// Arguments of `eval`.
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

/// `eval` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// `ALLOWED`/`DENIED` and one line per side.
    Text,
    /// The verdict's JSON form: `{"allowed", "egress", "ingress"}`.
    Json,
}

/// Decides the flow and prints the verdict; exits 0 for allow and deny alike.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let flow = args.flow.flow(&engine)?;
    let verdict = engine.evaluate(&flow);
    let mut out = std::io::stdout().lock();
    match args.output {
        Format::Json => writeln!(out, "{}", serde_json::to_string(&verdict)?)?,
        Format::Text => writeln!(out, "{verdict}")?,
    }
    Ok(())
}
