//! The agent process: the follow loop with the nftables sink, the HTTP endpoints,
//! and (with a decision log) the nflog reader. Stopping the agent (or `kill -9`) leaves the
//! ruleset in the kernel enforcing; the next start replaces it atomically.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use palisade_follow::source::SourceSpec;
use palisade_follow::source::{self, Source, SourceError};
use palisade_follow::store::Store;

use crate::http::Endpoints;
use crate::metrics::Metrics;
use crate::reconcile::{Config, Reconciler};
use crate::snapshot::Snapshots;

/// Everything `palisade agent` is told.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The source.
    pub source: SourceSpec,
    /// Reconcile settings (node, network namespace).
    pub config: Config,
    /// The address of `/metrics`, `/healthz` and `/readyz`.
    pub listen: SocketAddr,
    /// Kubeconfig file for the `kube` source.
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for the `kube` source.
    pub context: Option<String>,
    /// Address of `/metrics` alone, for Prometheus (none: only `listen` serves it).
    pub metrics_listen: Option<SocketAddr>,
    /// Record on each AdminNetworkPolicy and ClusterNetworkPolicy whether it is programmed
    /// on this node (`--source kube` and a node only).
    pub report_status: bool,
    /// Where to write the decision log (`-`: stdout).
    pub decision_log: Option<PathBuf>,
    /// What the decision log writes.
    pub decision_log_settings: crate::decision_log::Settings,
    /// Learning the addresses of `domainNames` peers from DNS replies (`--dns-resolver`).
    pub dns: Option<crate::learner::Settings>,
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The directory source failed to start.
    #[error(transparent)]
    Dir(#[from] source::dir::DirError),
    /// The endpoints could not be bound.
    #[error("{flag} {addr}: {source}")]
    Listen {
        /// The flag that named the address.
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The decision log file could not be opened.
    #[error("--decision-log {}: {source}", path.display())]
    DecisionLog {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The source is not available in this build or failed.
    #[error("source: {0}")]
    Source(String),
    /// SIGTERM could not be handled.
    #[error("cannot handle SIGTERM: {0}")]
    Signal(#[source] std::io::Error),
    /// Learning domain names could not start.
    #[error("--dns-resolver: {0}")]
    Dns(#[from] crate::learner::LearnError),
    /// The reconcile loop stopped.
    #[error("reconcile loop stopped: {0}")]
    Reconcile(String),
}

/// Runs the agent until SIGINT or SIGTERM (or a fatal error).
pub async fn run(options: AgentOptions) -> Result<(), AgentError> {
    let metrics = Arc::new(Metrics::new());
    let source = Source::start(
        &options.source,
        options.kubeconfig.as_deref(),
        options.context.as_deref(),
    )
    .await
    .map_err(|e| match e {
        SourceError::Dir(e) => AgentError::Dir(e),
        SourceError::Kube(e) => AgentError::Source(e.to_string()),
    })?;
    let client = source.client().cloned();
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|source| AgentError::Listen {
            flag: "--listen",
            addr: options.listen,
            source,
        })?;
    let metrics_listener = match options.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| AgentError::Listen {
                    flag: "--metrics-listen",
                    addr,
                    source,
                })?,
        ),
        None => None,
    };
    tracing::info!(
        listen = %options.listen,
        metrics_listen = options.metrics_listen.map(|a| a.to_string()).unwrap_or_default(),
        source = %options.source,
        node = options.config.node.as_deref().unwrap_or("(every pod)"),
        "agent started"
    );
    let mut reconciler = Reconciler::new(options.config.clone(), metrics.clone());
    let snapshots = reconciler.snapshots();
    let learning = options.dns.as_ref().map(|_| crate::learner::channel());
    if let Some((_, names)) = &learning {
        reconciler = reconciler.with_learned(names.clone());
    }
    if options.report_status {
        let (Some(client), Some(node)) = (client, options.config.node.clone()) else {
            return Err(AgentError::Source(
                "--report-status needs --source kube and --node".into(),
            ));
        };
        let (publish, published) = tokio::sync::watch::channel(crate::status::Desired::new());
        reconciler = reconciler.with_status(publish);
        tokio::spawn(crate::status::run(client, node, published));
    }
    let mut loop_thread = tokio::spawn(palisade_follow::follow(
        source,
        Store::default(),
        reconciler,
    ));
    let holding = options.dns.as_ref().is_some_and(|d| d.hold);
    let names = match (options.dns.clone(), learning) {
        (Some(settings), Some((publish, names))) => {
            crate::learner::start(
                settings,
                snapshots.clone(),
                metrics.clone(),
                options.config.netns.clone(),
                publish,
            )?;
            Some(names)
        }
        _ => None,
    };
    let refresh = refresh_counters(
        snapshots.clone(),
        metrics.clone(),
        options.config.netns.clone(),
    );
    let mut http = tokio::spawn(crate::http::serve(
        listener,
        Endpoints::All,
        metrics.clone(),
        refresh.clone(),
    ));
    let mut metrics_http = match metrics_listener {
        Some(listener) => tokio::spawn(crate::http::serve(
            listener,
            Endpoints::MetricsOnly,
            metrics.clone(),
            refresh,
        )),
        None => tokio::spawn(std::future::pending::<std::io::Result<()>>()),
    };
    if let Some(path) = &options.decision_log {
        let out: Box<dyn std::io::Write + Send> = if path.as_os_str() == "-" {
            Box::new(std::io::stdout())
        } else {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| AgentError::DecisionLog {
                    path: path.clone(),
                    source,
                })?;
            Box::new(std::io::LineWriter::new(file))
        };
        let (snapshots, metrics) = (snapshots.clone(), metrics.clone());
        let settings = options.decision_log_settings;
        tokio::spawn(async move {
            if let Err(e) = crate::decision_log::run(snapshots, out, settings, metrics, names).await
            {
                tracing::error!(error = %e, "decision log stopped");
            }
        });
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(AgentError::Signal)?;
    let release = || {
        // Replies pass at once rather than wait out the hold (3 s) for a stopped agent.
        if holding && let Err(e) = palisade_nft::release_replies(options.config.netns.as_deref()) {
            tracing::warn!(error = %e, "could not stop holding DNS replies; they pass within 3 s");
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {
            release();
            tracing::info!("interrupted; the ruleset stays in force");
        }
        _ = term.recv() => {
            release();
            tracing::info!("terminated; the ruleset stays in force");
        }
        r = &mut loop_thread => return Err(AgentError::Reconcile(format!("{r:?}"))),
        r = &mut http => return Err(AgentError::Reconcile(format!("HTTP server: {r:?}"))),
        r = &mut metrics_http => {
            return Err(AgentError::Reconcile(format!("metrics HTTP server: {r:?}")));
        }
    }
    Ok(())
}

/// Before each scrape: the kernel's per-decision packet counts.
fn refresh_counters(
    snapshots: Snapshots,
    metrics: Arc<Metrics>,
    netns: Option<String>,
) -> Arc<dyn Fn() + Send + Sync> {
    Arc::new(move || {
        let Ok(counts) = palisade_nft::logged_packets(netns.as_deref()) else {
            return;
        };
        // The latest snapshot, taken without holding the channel.
        let snapshot = snapshots.borrow().clone();
        if let Some(ruleset) = &snapshot.ruleset {
            metrics.decisions(&crate::decisions::by_decision(ruleset, &counts));
        }
    })
}
