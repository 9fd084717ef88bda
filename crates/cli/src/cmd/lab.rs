//! `palisade lab up|apply|probe|down` (root): a network-namespace node that enforces the
//! compiled ruleset, probed with real packets.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use palisade_engine::Probe;
use palisade_lab::{Lab, Target};
use palisade_model::Protocol;

use super::matrix::{Format, Grid, print, probes};
use crate::common::{Input, parse_protocol};
use crate::error::CliError;

/// `lab` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Build the node: a namespace per pod (with its address and a responder on its
    /// container ports) and an external host at 192.0.2.10.
    Up {
        /// Cluster manifests (pods and their addresses).
        #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        name: Name,
    },
    /// Compile the cluster and policies and load the ruleset into the node (one transaction).
    Apply {
        #[command(flatten)]
        input: Input,
        #[command(flatten)]
        name: Name,
    },
    /// Probe every pod pair (and the external host) with real packets; print the observed
    /// matrix, and with --compare every disagreement with the evaluator (exit 1 if any).
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
        output: Format,
        /// Also evaluate with the engine and list disagreements.
        #[arg(long)]
        compare: bool,
    },
    /// Remove everything the lab created (also after a crash).
    Down {
        #[command(flatten)]
        name: Name,
    },
    /// Serve TCP and UDP echo on ports (runs inside a pod namespace).
    #[command(hide = true)]
    Serve {
        /// `80/TCP,81/UDP,...`
        #[arg(long, value_delimiter = ',')]
        ports: Vec<String>,
        /// File to create once listening.
        #[arg(long)]
        ready_file: Option<PathBuf>,
    },
    /// Probe targets concurrently (runs inside a pod namespace).
    #[command(hide = true)]
    ProbeBatch {
        /// `ADDR:PORT/PROTOCOL` targets.
        targets: Vec<String>,
    },
    /// Measure new-connection latency (runs inside a pod namespace; for benchmarks).
    #[command(hide = true)]
    ConnectBench {
        /// `ADDR:PORT`.
        #[arg(long)]
        to: std::net::SocketAddr,
        /// How long, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        millis: u64,
    },
    /// Hold a TCP connection and report every exchange (runs inside a pod namespace).
    #[command(hide = true)]
    Hold {
        /// `ADDR:PORT`.
        #[arg(long)]
        to: std::net::SocketAddr,
        /// How long, in milliseconds.
        #[arg(long, default_value_t = 3000)]
        millis: u64,
    },
}

/// The lab's name.
#[derive(Debug, clap::Args)]
pub struct Name {
    /// Lab name: prefix of its namespaces (1-8 letters or digits).
    #[arg(long = "name", default_value = "palisade")]
    name: String,
}

fn failed(e: impl std::fmt::Display) -> CliError {
    CliError::Failed(e.to_string())
}

fn exe() -> Result<PathBuf, CliError> {
    std::env::current_exe().map_err(failed)
}

/// Runs a lab subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    match args {
        Args::Up { files, name } => {
            let loaded = palisade_model::load_paths(&files, Default::default())?;
            let lab = Lab::up(&loaded.cluster, &name.name, &exe()?).map_err(failed)?;
            eprintln!(
                "lab {}: node {}, {} pods, external host {}",
                lab.name,
                lab.node_netns,
                lab.pods.len(),
                lab.external.ip
            );
            Ok(())
        }
        Args::Apply { input, name } => {
            let lab = Lab::load(&name.name).map_err(failed)?;
            let engine = input.engine()?;
            let ruleset = palisade_nft::compile(&engine, None).map_err(failed)?;
            palisade_nft::apply(&ruleset, Some(&lab.node_netns)).map_err(failed)?;
            let cut =
                palisade_nft::cut_forbidden(&ruleset, Some(&lab.node_netns)).map_err(failed)?;
            eprintln!(
                "lab {}: ruleset loaded ({} chains), {cut} forbidden connection(s) cut",
                lab.name,
                ruleset.chains.len()
            );
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
            let lab = Lab::load(&name.name).map_err(failed)?;
            let engine = input.engine()?;
            let probes: Vec<Probe> = probes(&engine, &ports, &protocols)
                .into_iter()
                .filter(|p| p.protocol != Protocol::Sctp)
                .collect();
            let observed = observe(&lab, &probes)?;
            let names: Vec<String> = lab
                .pods
                .iter()
                .map(|p| p.key.clone())
                .chain([lab.external.key.clone()])
                .collect();
            let grid = Grid {
                names: names.clone(),
                probes: probes.clone(),
                allowed: Box::new(|p, f, t| observed.get(&(p, f, t)).copied().unwrap_or(true)),
            };
            print(output, &grid)?;
            if compare {
                let diffs = disagreements(&engine, &lab, &probes, &observed);
                for d in &diffs {
                    eprintln!("{d}");
                }
                if !diffs.is_empty() {
                    return Err(CliError::Failed(format!(
                        "{} disagreement(s) between the kernel and the evaluator",
                        diffs.len()
                    )));
                }
                eprintln!(
                    "the kernel agrees with the evaluator on all {} probes",
                    observed.len()
                );
            }
            Ok(())
        }
        Args::Down { name } => palisade_lab::down(&name.name).map_err(failed),
        Args::Serve { ports, ready_file } => {
            let ports: Vec<(u16, Protocol)> = ports
                .iter()
                .map(|s| {
                    let (n, p) = s
                        .split_once('/')
                        .ok_or_else(|| CliError::Usage(format!("{s:?}: want PORT/PROTOCOL")))?;
                    Ok((
                        n.parse()
                            .map_err(|_| CliError::Usage(format!("{s:?}: bad port")))?,
                        parse_protocol(p).map_err(CliError::Usage)?,
                    ))
                })
                .collect::<Result<_, CliError>>()?;
            palisade_lab::serve(&ports, ready_file.as_deref()).map_err(failed)
        }
        Args::ProbeBatch { targets } => {
            let targets: Vec<Target> = targets
                .iter()
                .map(|t| t.parse().map_err(CliError::Usage))
                .collect::<Result<_, _>>()?;
            for r in palisade_lab::probe_batch(&targets) {
                println!("{r}");
            }
            Ok(())
        }
        Args::ConnectBench { to, millis } => {
            let s =
                palisade_lab::connect_bench(to, Duration::from_millis(millis)).map_err(failed)?;
            // connects per second of connect time (timeouts are lost SYNs, counted apart)
            let rate = 1e6 / s.mean_us.max(1) as f64;
            println!(
                "connections {} timeouts {} per_second {rate:.0} p50_us {} p99_us {}",
                s.connections, s.timeouts, s.p50_us, s.p99_us
            );
            Ok(())
        }
        Args::Hold { to, millis } => palisade_lab::hold(
            to,
            Duration::from_millis(millis),
            Duration::from_millis(50),
            &mut std::io::stdout().lock(),
        )
        .map_err(failed),
    }
}

/// Probes every (probe, from, to) of the lab: pods and the external host as rows and columns.
/// Keys are (probe index, from index, to index); pairs of an endpoint with itself are not probed.
pub fn observe(
    lab: &Lab,
    probes: &[Probe],
) -> Result<HashMap<(usize, usize, usize), bool>, CliError> {
    let endpoints: Vec<&palisade_lab::LabPod> = lab.pods.iter().chain([&lab.external]).collect();
    let plan: Vec<(String, Vec<Target>)> = endpoints
        .iter()
        .map(|from| {
            let targets = endpoints
                .iter()
                .filter(|to| to.netns != from.netns)
                .flat_map(|to| {
                    probes.iter().map(|p| Target {
                        ip: to.ip,
                        port: p.port,
                        protocol: p.protocol,
                    })
                })
                .collect();
            (from.netns.clone(), targets)
        })
        .collect();
    let results = lab.probe(&exe()?, &plan).map_err(failed)?;
    let index: HashMap<&str, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.netns.as_str(), i))
        .collect();
    let by_ip: HashMap<std::net::IpAddr, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.ip, i))
        .collect();
    let mut out = HashMap::new();
    for (netns, r) in results {
        let (Some(&f), Some(&t)) = (index.get(netns.as_str()), by_ip.get(&r.target.ip)) else {
            continue;
        };
        if let Some(p) = probes
            .iter()
            .position(|p| p.port == r.target.port && p.protocol == r.target.protocol)
        {
            out.insert((p, f, t), r.reached);
        }
    }
    Ok(out)
}

/// Every probe where the kernel and the evaluator disagree, as a sentence.
pub fn disagreements(
    engine: &palisade_engine::Engine,
    lab: &Lab,
    probes: &[Probe],
    observed: &HashMap<(usize, usize, usize), bool>,
) -> Vec<String> {
    let endpoints: Vec<&palisade_lab::LabPod> = lab.pods.iter().chain([&lab.external]).collect();
    let mut out = Vec::new();
    let mut keys: Vec<_> = observed.keys().copied().collect();
    keys.sort();
    for (p, f, t) in keys {
        let (from, to, probe) = (endpoints[f], endpoints[t], probes[p]);
        let flow = palisade_engine::Flow {
            src: engine.endpoint_for_ip(from.ip),
            dst: engine.endpoint_for_ip(to.ip),
            protocol: probe.protocol,
            port: probe.port,
        };
        let want = engine.evaluate(&flow).allowed;
        let got = observed[&(p, f, t)];
        if want != got {
            out.push(format!(
                "{} -> {} {}/{}: kernel {}, evaluator {}\n{}",
                from.key,
                to.key,
                probe.protocol,
                probe.port,
                if got { "allowed" } else { "denied" },
                if want { "allowed" } else { "denied" },
                engine.explain(&flow)
            ));
        }
    }
    out
}
