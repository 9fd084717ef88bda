//! `palisade compile --target nftables|neutron`: the evaluator's state in a data plane's shape.

use crate::common::Input;
use crate::error::CliError;

/// Arguments of `compile`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  palisade compile --target nftables -f examples/xyz --node node-1\n  palisade compile --target nftables -f cluster/ --stats\n  sudo palisade compile --target nftables -f cluster/ --node \"$(hostname)\" --apply\n  palisade compile --target neutron -f cluster/ -f policies/ -o json"
)]
pub struct Args {
    #[command(flatten)]
    pub input: Input,
    /// What to compile to.
    #[arg(long, value_enum)]
    pub target: Target,
    /// Only the pods of this node (default: every pod).
    #[arg(long)]
    pub node: Option<String>,
    /// Output format: `nft` (default) or `linear` for nftables, `json` (default) or `yaml`
    /// for Neutron.
    #[arg(short = 'o', long = "output", value_enum)]
    pub output: Option<Format>,
    /// nftables: print the ruleset's size (chains, rules, set and map elements, script
    /// bytes) instead of the ruleset.
    #[arg(long)]
    pub stats: bool,
    /// nftables (root): load the ruleset into this network namespace's nftables instead
    /// of printing it — in stages where there is no `inet palisade` table yet, else
    /// replacing the table in one transaction — then delete the tracked connections it
    /// forbids; prints what was loaded.
    #[arg(long)]
    pub apply: bool,
    #[command(flatten)]
    pub neutron: super::compile_neutron::Flags,
}

/// `compile` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// nftables: the `nft -f` script with verdict maps.
    Nft,
    /// nftables: the same decisions as one flat rule list (a benchmark baseline).
    Linear,
    /// Neutron: JSON.
    Json,
    /// Neutron: YAML.
    Yaml,
}

/// Compile targets.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Target {
    /// An `nft -f` ruleset for table `inet palisade`.
    Nftables,
    /// OpenStack Neutron security groups.
    Neutron,
}

impl Format {
    /// The name on the command line.
    fn as_str(self) -> &'static str {
        match self {
            Format::Nft => "nft",
            Format::Linear => "linear",
            Format::Json => "json",
            Format::Yaml => "yaml",
        }
    }
}

/// Loads the input and hands it to the target's compiler.
pub fn run(args: Args) -> Result<(), CliError> {
    let format = match (args.target, args.output) {
        (Target::Nftables, None) => Format::Nft,
        (Target::Neutron, None) => Format::Json,
        (Target::Nftables, Some(f @ (Format::Nft | Format::Linear)))
        | (Target::Neutron, Some(f @ (Format::Json | Format::Yaml))) => f,
        (Target::Nftables, Some(f)) => {
            return Err(CliError::Usage(format!(
                "-o {}: the nftables target writes nft or linear",
                f.as_str()
            )));
        }
        (Target::Neutron, Some(f)) => {
            return Err(CliError::Usage(format!(
                "-o {}: the neutron target writes json or yaml",
                f.as_str()
            )));
        }
    };
    if args.stats && (!matches!(args.target, Target::Nftables) || args.output.is_some()) {
        return Err(CliError::Usage(
            "--stats: only with --target nftables, and without -o".into(),
        ));
    }
    if args.apply
        && (!matches!(args.target, Target::Nftables) || args.output.is_some() || args.stats)
    {
        return Err(CliError::Usage(
            "--apply: only with --target nftables, and without -o or --stats".into(),
        ));
    }
    let engine = args.input.engine()?;
    let result = match args.target {
        Target::Nftables if args.stats => {
            super::compile_nftables::stats(&engine, args.node.as_deref())
        }
        Target::Nftables if args.apply => {
            super::compile_nftables::apply(&engine, args.node.as_deref())
        }
        Target::Nftables => super::compile_nftables::run(&engine, args.node.as_deref(), format),
        Target::Neutron => super::compile_neutron::run(&engine, &args.neutron, format),
    };
    // The process ends here: its memory goes back whole, without a walk over every
    // object (15 ms at 10,000 pods, a twentieth of a node's compile).
    std::mem::forget(engine);
    result
}
