//! `palisade agent`: live enforcement that follows a manifest directory or the Kubernetes
//! API.

use std::net::SocketAddr;
use std::path::PathBuf;

use palisade_agent::decision_log::{Level as DecisionLogLevel, Settings};
use palisade_agent::reconcile::Config;
use palisade_agent::run::AgentOptions;
use palisade_follow::source::SourceSpec;

use crate::error::CliError;

/// Arguments of `palisade agent`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade agent --source dir:/etc/palisade/cluster
  palisade agent --source kube --node \"$NODE_NAME\" --decision-log -
  ip netns exec lab-node palisade agent --source dir:manifests --listen 127.0.0.1:9464
  palisade agent --source kube --node \"$NODE_NAME\" --listen 127.0.0.1:19465 --metrics-listen 0.0.0.0:19464
  palisade agent --uninstall        # remove the agent's nftables table from this node")]
pub struct Args {
    /// Where the cluster comes from: `dir:PATH` (a directory of manifests, watched) or
    /// `kube` (the Kubernetes API).
    #[arg(long, value_parser = clap::value_parser!(SourceSpec), required_unless_present = "uninstall")]
    source: Option<SourceSpec>,
    /// Remove the agent's nftables table (`inet palisade`, nothing else) from this network
    /// namespace and exit: what a node needs once the agent is removed.
    #[arg(long, conflicts_with_all = ["source", "decision_log"])]
    uninstall: bool,
    /// Enforce only this node's pods (default: every pod with an address).
    #[arg(long)]
    node: Option<String>,
    /// Address of /metrics, /healthz and /readyz (loopback: the kubelet probes the health
    /// endpoints from the node).
    #[arg(long, default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// Also serve /metrics alone, read-only, at this address (for Prometheus in the
    /// cluster, e.g. 0.0.0.0:19464); nothing else is served there.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Record on each AdminNetworkPolicy and ClusterNetworkPolicy, as the condition
    /// `palisade.dev/Programmed-<node>` in status.conditions, whether it is programmed on
    /// this node (needs --source kube, --node and `update` on their status). With
    /// --uninstall: remove this node's conditions.
    #[arg(long)]
    report_status: bool,
    /// Write one JSON line per logged decision to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE|-")]
    decision_log: Option<PathBuf>,
    /// Which decisions the decision log writes: `deny` (denials, and connections staged
    /// policies would decide differently) or `all` (admin-tier allows and passes too).
    #[arg(long, value_name = "deny|all", default_value = "deny", value_parser = clap::value_parser!(DecisionLogLevel))]
    decision_log_level: DecisionLogLevel,
    /// The most decision-log lines per second for one source address (bursts of twice as
    /// many); the lines dropped are counted in `palisade_decision_log_dropped_lines_total`.
    #[arg(long, value_name = "N", default_value_t = 10.0)]
    decision_log_rate: f64,
    /// Learn the addresses of ClusterNetworkPolicy `domainNames` peers from the DNS replies
    /// pods receive from this resolver (the cluster DNS Service address, or a node-local
    /// cache; repeatable). Only replies to queries sent to these addresses on UDP port 53
    /// are read. Without it, `domainNames` peers admit nothing.
    #[arg(long, value_name = "ADDRESS")]
    dns_resolver: Vec<std::net::IpAddr>,
    /// The range a DNS answer's TTL is clamped to, in seconds: MIN-MAX.
    #[arg(long, value_name = "MIN-MAX", default_value = "30-300", value_parser = parse_ttl_range)]
    dns_ttl: palisade_agent::learned::TtlRange,
    /// Let DNS replies pass at once and learn from a copy, instead of holding each reply
    /// until its addresses are allowed (a connection right after the lookup may then be
    /// dropped once and retried).
    #[arg(long, requires = "dns_resolver")]
    dns_no_hold: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Kubeconfig file for `--source kube` (default: in-cluster, then $KUBECONFIG or
    /// ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for `--source kube`.
    #[arg(long)]
    context: Option<String>,
}

/// Removes `node`'s status conditions from every reported policy.
fn remove_conditions(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
    node: &str,
) -> Result<usize, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    runtime.block_on(async {
        let client = palisade_follow::source::kube::client(kubeconfig, context).await?;
        Ok(palisade_agent::status::remove_all(&client, node).await?)
    })
}

/// `MIN-MAX` seconds, 1 ≤ MIN ≤ MAX.
fn parse_ttl_range(s: &str) -> Result<palisade_agent::learned::TtlRange, String> {
    let err = || format!("{s:?}: expected MIN-MAX in seconds, 1 <= MIN <= MAX (e.g. 30-300)");
    let (min, max) = s.split_once('-').ok_or_else(err)?;
    let (min, max): (u64, u64) = (
        min.trim().parse().map_err(|_| err())?,
        max.trim().parse().map_err(|_| err())?,
    );
    if min == 0 || min > max {
        return Err(err());
    }
    Ok(palisade_agent::learned::TtlRange {
        min: std::time::Duration::from_secs(min),
        max: std::time::Duration::from_secs(max),
    })
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Runs the agent until it is stopped.
pub fn run(args: Args) -> Result<(), CliError> {
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, never in a log file or collector.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        );
    match args.log_format {
        LogFormat::Text => subscriber.init(),
        LogFormat::Json => subscriber.json().init(),
    }
    if args.report_status && args.node.is_none() {
        return Err(CliError::Usage(
            "--report-status: needs --node (the condition is one per node)".into(),
        ));
    }
    let Some(source) = args.source else {
        // Only `--uninstall` goes without a source (clap enforces it).
        palisade_nft::remove(None)?;
        eprintln!(
            "removed the nftables tables inet palisade, inet palisade_dialed and inet palisade_dns (if they were there)"
        );
        if let (true, Some(node)) = (args.report_status, args.node.as_deref()) {
            let removed =
                remove_conditions(args.kubeconfig.as_deref(), args.context.as_deref(), node)?;
            eprintln!("removed this node's status condition from {removed} polic(ies)");
        }
        return Ok(());
    };
    if args.report_status && !matches!(source, SourceSpec::Kube) {
        return Err(CliError::Usage(
            "--report-status: needs --source kube (the conditions are written to the API server)"
                .into(),
        ));
    }
    if !args.decision_log_rate.is_finite() || args.decision_log_rate <= 0.0 {
        return Err(CliError::Usage(
            "--decision-log-rate: expected a number of lines per second above 0".into(),
        ));
    }
    let options = AgentOptions {
        source,
        config: Config {
            node: args.node,
            netns: None,
        },
        listen: args.listen,
        report_status: args.report_status,
        metrics_listen: args.metrics_listen,
        kubeconfig: args.kubeconfig,
        context: args.context,
        decision_log: args.decision_log,
        decision_log_settings: Settings {
            level: args.decision_log_level,
            per_source_per_second: args.decision_log_rate,
        },
        dns: (!args.dns_resolver.is_empty()).then_some(palisade_agent::learner::Settings {
            resolvers: args.dns_resolver,
            ttl: args.dns_ttl,
            hold: !args.dns_no_hold,
        }),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    runtime
        .block_on(palisade_agent::run::run(options))
        .map_err(CliError::Agent)
}
