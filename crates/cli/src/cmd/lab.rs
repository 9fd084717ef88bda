//! `palisade lab up|apply|probe|down` (root): network-namespace nodes that enforce the
//! compiled rulesets, probed with real packets.

use std::ffi::OsString;
use std::path::PathBuf;

use palisade_lab::Lab;
use palisade_model::Protocol;

use super::matrix::{Grid, GridFormat, print, probes};
use crate::common::{Input, parse_protocol};
use crate::error::CliError;

/// `lab` subcommands.
#[derive(Debug, clap::Subcommand)]
#[command(
    after_help = "Examples (root):\n  palisade lab up -f examples/xyz/cluster.yaml\n  palisade lab apply -f examples/xyz\n  palisade lab probe -f examples/xyz --ports 80,81 --protocols TCP,UDP --compare\n  palisade lab down"
)]
pub enum Args {
    /// Build the nodes: a namespace per pod (with its address and a responder on its
    /// container ports), one node namespace (or one per node when the pods name several,
    /// joined by a fabric) and an external host at 192.0.2.10.
    Up {
        /// Cluster manifests (pods and their addresses).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        name: Name,
    },
    /// Compile the cluster and policies and load each node's ruleset into its node (one
    /// transaction per node).
    Apply {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        name: Name,
    },
    /// Probe every pair of pods, node addresses and the external host with real packets;
    /// print the observed matrix, and with --compare every disagreement with the evaluator
    /// (exit 1 if any).
    Probe {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        name: Name,
        /// Ports to probe (default: container ports).
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
        ports: Vec<u16>,
        /// Protocols (TCP, UDP; SCTP cannot be probed in this kernel).
        #[arg(long, value_delimiter = ',', value_parser = parse_protocol)]
        protocols: Vec<Protocol>,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
        output: GridFormat,
        /// Also evaluate with the engine and list disagreements.
        #[arg(long)]
        compare: bool,
    },
    /// Remove everything the lab created (also after a crash).
    Down {
        #[command(flatten)]
        name: Name,
    },
    /// Serve TCP and UDP echo (inside a pod namespace). This and the hidden subcommands
    /// below are the lab's in-namespace processes, started by the lab itself; their
    /// arguments are read by `palisade_lab::Helper`.
    #[command(hide = true)]
    Serve(HelperArgs),
    /// Probe targets concurrently (inside a pod namespace).
    #[command(hide = true)]
    ProbeBatch(HelperArgs),
    /// Hold a TCP connection and report every exchange (inside a pod namespace).
    #[command(hide = true)]
    Hold(HelperArgs),
    /// New-connection latency from inside a pod namespace (for benchmarks).
    #[command(hide = true)]
    ConnectBench(HelperArgs),
    /// Look a name up and connect to its first address at once (inside a pod namespace).
    #[command(hide = true)]
    Lookup(HelperArgs),
}

/// A helper's arguments, passed through unparsed.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct HelperArgs {
    /// Everything after the subcommand's name.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<OsString>,
}

/// The lab's name.
#[derive(Debug, clap::Args)]
pub struct Name {
    /// Lab name: prefix of its namespaces (1-8 letters or digits).
    #[arg(long = "name", default_value = "palisade")]
    name: String,
}

/// This program, which the lab starts again inside its namespaces.
fn exe() -> Result<PathBuf, CliError> {
    std::env::current_exe().map_err(CliError::file("/proc/self/exe"))
}

/// Runs a lab subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    match args {
        Args::Up { files, name } => {
            let loaded = palisade_model::load_paths(&files, Default::default())?;
            let lab = Lab::up(&loaded.cluster, &name.name, &exe()?)?;
            report_up(&lab);
            Ok(())
        }
        Args::Apply { input, name } => {
            let lab = Lab::load(&name.name)?;
            let engine = lab.engine(&input.engine()?)?;
            let rulesets = lab.compile(&engine)?;
            lab.apply(&rulesets)?;
            let pinned = palisade_lab::pinned_ports(&lab, &engine);
            if !pinned.is_empty() {
                lab.load_services(&pinned, 0)?;
            }
            let cut = lab.cut_forbidden(&rulesets)?;
            for ((node, rs), cut) in lab.nodes.iter().zip(&rulesets).zip(cut) {
                eprintln!(
                    "lab {}: {}: ruleset loaded ({} chains), {cut} forbidden connection(s) cut",
                    lab.name,
                    node_label(node),
                    rs.chains.len()
                );
            }
            Ok(())
        }
        Args::Probe {
            input,
            name,
            ports,
            protocols,
            output,
            compare,
        } => {
            let lab = Lab::load(&name.name)?;
            let engine = lab.engine(&input.engine()?)?;
            let probes = probes(&engine, &ports, &protocols);
            let observed = palisade_lab::observe(&lab, &exe()?, &probes)?;
            let grid = Grid {
                names: observed.endpoints().iter().map(|e| e.key.clone()).collect(),
                probes: observed.probes().to_vec(),
                allowed: Box::new(|p, f, t| observed.reached(p, f, t).unwrap_or(true)),
            };
            print(output, &grid)?;
            if compare {
                let diffs = observed.disagreements(&engine);
                for d in &diffs {
                    eprintln!("{d}");
                }
                let services = compare_services(&lab, &engine)?;
                let wrong = diffs.len() + services;
                if wrong > 0 {
                    return Err(CliError::Disagreements(wrong));
                }
                eprintln!(
                    "the kernel agrees with the evaluator on all {} probes",
                    observed.observations().len()
                );
            }
            Ok(())
        }
        Args::Down { name } => Ok(palisade_lab::down(&name.name)?),
        Args::Serve(h) => helper("serve", h),
        Args::ProbeBatch(h) => helper("probe-batch", h),
        Args::Hold(h) => helper("hold", h),
        Args::ConnectBench(h) => helper("connect-bench", h),
        Args::Lookup(h) => helper("lookup", h),
    }
}

/// Probes every Service port through its address, endpoint by endpoint; prints each
/// disagreement, and returns their number.
fn compare_services(lab: &Lab, engine: &palisade_engine::Engine) -> Result<usize, CliError> {
    let observed = palisade_lab::observe_services(lab, &exe()?, engine)?;
    if observed.is_empty() {
        return Ok(0);
    }
    let mut wrong = 0;
    for o in &observed {
        if o.disagrees() {
            wrong += 1;
            eprintln!("{o}");
        }
    }
    if wrong == 0 {
        eprintln!(
            "the kernel agrees with the evaluator on all {} Service probes",
            observed.len()
        );
    }
    Ok(wrong)
}

/// Prints what `lab up` made: the namespaces, so scripts can run commands in them.
fn report_up(lab: &Lab) {
    let Some(fabric) = &lab.fabric_netns else {
        eprintln!(
            "lab {}: node {}, {} pods, external host {}",
            lab.name,
            lab.nodes
                .iter()
                .map(|n| n.netns.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            lab.pods.len(),
            lab.external.ip
        );
        return;
    };
    eprintln!(
        "lab {}: {} nodes joined by {fabric}, {} pods, external host {} ({})",
        lab.name,
        lab.nodes.len(),
        lab.pods.len(),
        lab.external.ip,
        lab.external.netns
    );
    for node in &lab.nodes {
        let address = match node.ip() {
            Some(ip) if node.generated_address => format!("{ip} (generated)"),
            Some(ip) => ip.to_string(),
            None => "no address".into(),
        };
        let pods: Vec<&str> = lab.pods_on(node).map(|p| p.key.as_str()).collect();
        let mut line = format!(
            "{}: namespace {}, address {address}, pods {}",
            node_label(node),
            node.netns,
            pods.join(" ")
        );
        if !node.host_network_pods.is_empty() {
            line += &format!(", host network {}", node.host_network_pods.join(" "));
        }
        eprintln!("{line}");
    }
}

/// `node NAME`, or the namespace of an unnamed node.
fn node_label(node: &palisade_lab::LabNode) -> String {
    match &node.name {
        Some(n) => format!("node {n}"),
        None => format!("node {}", node.netns),
    }
}

/// Runs a lab helper in this process.
fn helper(name: &str, h: HelperArgs) -> Result<(), CliError> {
    let args = std::iter::once(OsString::from(name)).chain(h.args);
    let helper = palisade_lab::Helper::parse(args).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(helper.run(&mut std::io::stdout().lock())?)
}
