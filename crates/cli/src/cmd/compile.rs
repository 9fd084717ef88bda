//! `palisade compile --target nftables|neutron`: the evaluator's state in a data plane's shape.

use crate::common::Input;
use crate::error::CliError;

/// Arguments of `compile`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub input: Input,
    /// What to compile to.
    #[arg(long, value_enum)]
    pub target: Target,
    /// Only the pods of this node (default: every pod).
    #[arg(long)]
    pub node: Option<String>,
    /// Output format (target-specific; see `docs/`).
    #[arg(short = 'o', long = "output")]
    pub output: Option<String>,
    #[command(flatten)]
    pub neutron: super::compile_neutron::Flags,
}

/// Compile targets.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Target {
    /// An `nft -f` ruleset for table `inet palisade`.
    Nftables,
    /// OpenStack Neutron security groups.
    Neutron,
}

/// Loads the input and hands it to the target's compiler.
pub fn run(args: Args) -> Result<(), CliError> {
    match args.target {
        Target::Nftables => super::compile_nftables::run(&args),
        Target::Neutron => super::compile_neutron::run(&args),
    }
}
