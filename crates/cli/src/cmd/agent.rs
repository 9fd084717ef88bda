//! `palisade agent`: live enforcement that follows a manifest directory or the Kubernetes
//! API.

use std::net::SocketAddr;
use std::path::PathBuf;

use palisade_agent::reconcile::Config;
use palisade_agent::run::{AgentOptions, SourceSpec};

use crate::error::CliError;

/// Arguments of `palisade agent`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade agent --source dir:/etc/palisade/cluster
  palisade agent --source kube --node \"$NODE_NAME\" --decision-log -
  ip netns exec lab-node palisade agent --source dir:manifests --listen 127.0.0.1:9464")]
pub struct Args {
    /// Where the cluster comes from: `dir:PATH` (a directory of manifests, watched) or
    /// `kube` (the Kubernetes API).
    #[arg(long, value_parser = clap::value_parser!(SourceSpec))]
    source: SourceSpec,
    /// Enforce only this node's pods (default: every pod with an address).
    #[arg(long)]
    node: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:9464")]
    listen: SocketAddr,
    /// Write one JSON line per logged decision to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE|-")]
    decision_log: Option<PathBuf>,
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

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Runs the agent until it is stopped.
pub fn run(args: Args) -> Result<(), CliError> {
    let subscriber = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        );
    match args.log_format {
        LogFormat::Text => subscriber.init(),
        LogFormat::Json => subscriber.json().init(),
    }
    let options = AgentOptions {
        source: args.source,
        config: Config {
            node: args.node,
            netns: None,
        },
        listen: args.listen,
        kubeconfig: args.kubeconfig,
        context: args.context,
        decision_log: args.decision_log,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    runtime
        .block_on(palisade_agent::run::run(options))
        .map_err(CliError::Agent)
}
