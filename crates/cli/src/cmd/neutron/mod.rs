//! `palisade neutron sync|controller`: apply the Neutron translation to a real Neutron,
//! once or continuously.

mod health;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use palisade_engine::{Engine, Options};
use palisade_follow::source::{Event, Source, SourceSpec};
use palisade_follow::store::Store;
use palisade_follow::{Batch, Sink};
use palisade_neutron::{TranslateOptions, Translation};
use palisade_neutron_sync::auth::{self, Auth};
use palisade_neutron_sync::client::{Client, Retry};
use palisade_neutron_sync::state::{DEFAULT_CLUSTER_ID, PortFilter};
use palisade_neutron_sync::{Report, SyncOptions};

use crate::common::Input;
use crate::error::CliError;

/// `palisade neutron` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Args {
    /// Bring Neutron's security groups and the pods' ports to the translation, once.
    #[command(after_help = "Examples:
  palisade neutron sync -f cluster/ -f policies/ --os-cloud prod --dry-run
  palisade neutron sync -f cluster/ --neutron-url http://127.0.0.1:9696 --project-id demo -o json
  source openrc.sh && palisade neutron sync -f cluster/ --network pods")]
    Sync(SyncArgs),
    /// Keep Neutron in step with a manifest directory or the Kubernetes API.
    #[command(after_help = "Examples:
  palisade neutron controller --source kube --os-cloud prod
  palisade neutron controller --source dir:manifests --neutron-url http://127.0.0.1:9696 --project-id demo")]
    Controller(ControllerArgs),
}

/// Where Neutron is and who the sync is to it.
#[derive(Debug, Clone, clap::Args)]
pub struct Connection {
    /// The cloud in clouds.yaml (`OS_CLIENT_CONFIG_FILE`, ./clouds.yaml,
    /// ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml) to log in to Keystone
    /// with. Without it and without --project-id: the `OS_*` variables (`OS_CLOUD` too).
    #[arg(long, value_name = "NAME")]
    os_cloud: Option<String>,
    /// Neutron's URL. With --project-id: a Neutron that trusts identity headers
    /// (development); with Keystone: overrides the catalog's endpoint.
    #[arg(long, value_name = "URL")]
    neutron_url: Option<String>,
    /// CA certificates (PEM) to trust for Keystone and Neutron instead of the usual web
    /// roots (default: OS_CACERT, or the cloud's `cacert` in clouds.yaml).
    #[arg(long, value_name = "FILE", conflicts_with = "project_id")]
    os_cacert: Option<PathBuf>,
    /// The project, sent as identity headers (needs --neutron-url; no Keystone).
    #[arg(
        long,
        value_name = "ID",
        requires = "neutron_url",
        conflicts_with = "os_cloud"
    )]
    project_id: Option<String>,
    /// The user sent with --project-id.
    #[arg(
        long,
        value_name = "ID",
        default_value = "palisade",
        requires = "project_id"
    )]
    user_id: String,
    /// Only ports on this network id are pods' ports.
    #[arg(long, value_name = "ID")]
    network: Option<String>,
    /// Only ports with this device_owner are pods' ports (Kuryr's: compute:kuryr).
    #[arg(long, value_name = "OWNER")]
    device_owner: Option<String>,
    /// This cluster's identity, recorded as the tag `palisade-cluster:<ID>` on every group
    /// it makes: only the project's groups with this tag are changed or used. Clusters
    /// sharing a project need distinct ids.
    #[arg(long, value_name = "ID", default_value = DEFAULT_CLUSTER_ID)]
    cluster_id: String,
    #[command(flatten)]
    translation: super::compile_neutron::Flags,
}

impl Connection {
    /// The credentials the flags and environment give.
    fn auth(&self) -> Result<Auth, CliError> {
        if let Some(project_id) = &self.project_id {
            let url = self
                .neutron_url
                .clone()
                .ok_or_else(|| CliError::Usage("--project-id needs --neutron-url".into()))?;
            return Ok(Auth::Headers {
                url,
                project_id: project_id.clone(),
                user_id: self.user_id.clone(),
            });
        }
        let cloud = self
            .os_cloud
            .clone()
            .or_else(|| std::env::var("OS_CLOUD").ok());
        let mut keystone = match cloud {
            Some(name) => auth::from_clouds(&name)?,
            None if std::env::var_os("OS_AUTH_URL").is_some() => {
                auth::from_env(|k| std::env::var(k).ok())?
            }
            None => {
                return Err(CliError::Usage(
                    "no Neutron credentials: give --os-cloud NAME, set OS_AUTH_URL and the other OS_* variables, or give --neutron-url and --project-id for a Neutron that trusts identity headers".into(),
                ));
            }
        };
        keystone.endpoint_override = self.neutron_url.clone();
        if let Some(ca) = &self.os_cacert {
            keystone.cacert = Some(ca.clone());
        }
        Ok(Auth::Keystone(keystone))
    }

    fn client(&self) -> Result<Client, CliError> {
        Ok(auth::connect(&self.auth()?, Retry::default())?)
    }

    fn filter(&self) -> PortFilter {
        PortFilter {
            network_id: self.network.clone(),
            device_owner: self.device_owner.clone(),
        }
    }

    /// The sync options of these flags.
    fn sync_options(&self, dry_run: bool) -> Result<SyncOptions, CliError> {
        palisade_neutron_sync::state::Owner::new("", &self.cluster_id)
            .map_err(|e| CliError::Usage(format!("--cluster-id: {e}")))?;
        Ok(SyncOptions {
            dry_run,
            ports: self.filter(),
            cluster_id: self.cluster_id.clone(),
        })
    }

    fn options(&self) -> TranslateOptions {
        self.translation.options()
    }
}

/// Arguments of `neutron sync`.
#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    connection: Connection,
    /// Read Neutron and print the calls a sync would make; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Output,
}

/// Output formats of `neutron sync`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Output {
    /// The calls, unmatched pods and a summary.
    Text,
    /// The report as JSON.
    Json,
}

/// Arguments of `neutron controller`.
#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// Where the cluster comes from: `dir:PATH` (a directory of manifests, watched) or
    /// `kube` (the Kubernetes API).
    #[arg(long, value_parser = clap::value_parser!(SourceSpec))]
    source: SourceSpec,
    #[command(flatten)]
    connection: Connection,
    /// Re-read Neutron and repair drift this often even when the cluster is quiet.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    resync: u64,
    /// Kubeconfig file for `--source kube`.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context for `--source kube`.
    #[arg(long)]
    context: Option<String>,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:9465")]
    listen: SocketAddr,
}

/// Runs a `neutron` subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    match args {
        Args::Sync(a) => sync(a),
        Args::Controller(a) => controller(a),
    }
}

fn translate(engine: &Engine, options: &TranslateOptions) -> Result<Translation, CliError> {
    let (t, warnings) = palisade_neutron::translate(engine, options)?;
    for w in warnings {
        eprintln!("palisade: warning: {w}");
    }
    Ok(t)
}

/// The input as the controller sees it: with `--skip-invalid`, an invalid policy whose
/// subject can be read isolates that subject (its fail-closed stand-in), as in the
/// controller and the agent; other invalid objects are skipped. Without it, invalid input
/// is refused.
fn engine(input: &Input) -> Result<Engine, CliError> {
    if !input.skip_invalid {
        return input.engine();
    }
    let mut store = Store::default();
    store.handle(Event::Put(input.bodies()?));
    for diags in store.problems().values() {
        for d in diags {
            eprintln!("skipped: {d}");
        }
    }
    if store.stand_ins() > 0 {
        eprintln!(
            "palisade: {} invalid polic(ies) isolate their subjects until fixed",
            store.stand_ins()
        );
    }
    Ok(Engine::new(store.cluster(), input.options()))
}

fn sync(args: SyncArgs) -> Result<(), CliError> {
    let options = args.connection.sync_options(args.dry_run)?;
    let engine = engine(&args.input)?;
    let desired = translate(&engine, &args.connection.options())?;
    let client = args.connection.client()?;
    let report = palisade_neutron_sync::sync(&client, &desired, &options)?;
    let mut out = std::io::stdout().lock();
    match args.output {
        Output::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        Output::Text => write!(out, "{}", text(&report))?,
    }
    eprintln!("palisade: {}", summary(&report));
    match &report.applied {
        Some(a) if !a.errors.is_empty() => Err(CliError::NeutronFailed(a.errors.len())),
        _ if !report.unplaceable.is_empty() => {
            Err(CliError::NeutronUnplaceable(report.unplaceable.len()))
        }
        _ => Ok(()),
    }
}

/// The report as lines: the calls, failures, unmatched pods.
fn text(r: &Report) -> String {
    let mut s = String::new();
    let verb = match &r.applied {
        None => "would call",
        Some(a) if a.errors.is_empty() => "called",
        // The sync stopped after the phase that failed: later calls were not made.
        Some(_) => "planned",
    };
    for c in &r.calls {
        s += &format!("{verb} {} {}  # {}\n", c.method, c.path, c.what);
    }
    if let Some(a) = &r.applied {
        for e in &a.errors {
            s += &format!("failed: {e}\n");
        }
    }
    for u in &r.unmatched {
        s += &format!(
            "unmatched pod {} (no port to change): {}\n",
            u.pod, u.reason
        );
    }
    for u in &r.unplaceable {
        s += &format!(
            "closed port {} (pods {}), it cannot be placed: {}\n",
            u.port_id,
            u.pods.join(", "),
            u.reason
        );
    }
    for g in &r.refused {
        s += &format!(
            "not ours, not used: group {} ({}): {}\n",
            g.id, g.name, g.reason
        );
    }
    s
}

/// One line: calls made, what changed, time.
fn summary(r: &Report) -> String {
    let done = match &r.applied {
        None => format!("dry run: {} write(s) planned", r.calls.len()),
        Some(a) => format!(
            "groups +{} -{}, rules +{} -{}, {} port update(s){}",
            a.groups_created,
            a.groups_deleted,
            a.rules_created,
            a.rules_deleted,
            a.ports_updated,
            if a.errors.is_empty() {
                String::new()
            } else {
                format!(", {} failed call(s)", a.errors.len())
            }
        ),
    };
    format!(
        "neutron sync: {done}; {} read(s), {} write(s), {} retried, {} ms{}",
        r.counts.reads,
        r.counts.writes,
        r.counts.retries,
        r.elapsed_ms,
        [
            (r.unmatched.len(), "pod(s) without a port"),
            (r.unplaceable.len(), "port(s) closed that cannot be placed"),
            (r.refused.len(), "look-alike group(s) not used"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("; {n} {what}"))
        .collect::<String>()
    )
}

fn controller(args: ControllerArgs) -> Result<(), CliError> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, never in a log file or collector.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let client = args.connection.client()?;
    args.connection.sync_options(false)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(CliError::Output)?;
    runtime.block_on(follow(args, client))
}

/// Follows the source: after the first full listing and after each batch of changes (or
/// every `--resync` seconds), translates the cluster and syncs Neutron to it. A failed
/// sync is retried after a short pause with a new login; the state Neutron holds
/// meanwhile is never more open than before or after (see docs/neutron.md).
async fn follow(args: ControllerArgs, client: Client) -> Result<(), CliError> {
    let source = Source::start(
        &args.source,
        args.kubeconfig.as_deref(),
        args.context.as_deref(),
    )
    .await
    .map_err(|e| CliError::Controller(e.to_string()))?;
    let health = health::Health::default();
    let bound = health
        .serve(args.listen)
        .map_err(|e| CliError::Controller(format!("--listen {}: {e}", args.listen)))?;
    tracing::info!(source = %args.source, listen = %bound, "neutron controller started");
    let sink = NeutronSink {
        options: args.connection.options(),
        sync_options: args.connection.sync_options(false)?,
        connection: args.connection,
        client,
        health,
        resync: Duration::from_secs(args.resync.max(1)),
        failed: false,
    };
    tokio::select! {
        () = palisade_follow::follow(source, Store::default(), sink) => Ok(()),
        _ = tokio::signal::ctrl_c() => {
            tracing::info!("interrupted; Neutron keeps the last state synced");
            Ok(())
        }
    }
}

/// The Neutron controller's sink: brings Neutron to the translation of each new state.
struct NeutronSink {
    connection: Connection,
    client: Client,
    health: health::Health,
    options: TranslateOptions,
    sync_options: SyncOptions,
    /// How often to sync when the cluster is quiet.
    resync: Duration,
    /// Whether the last sync (or login) failed: retried sooner, with a new login.
    failed: bool,
}

impl Sink for NeutronSink {
    fn source_health(&mut self, part: &str, problem: Option<&str>) {
        self.health.source(part, problem);
    }

    fn wake_after(&self) -> Option<Duration> {
        Some(if self.failed {
            Duration::from_secs(5)
        } else {
            self.resync
        })
    }

    fn apply(&mut self, batch: Batch<'_>) {
        for (text, diags) in batch.store.problems() {
            for d in diags {
                tracing::warn!(text = %text, "{d}");
            }
        }
        if self.failed {
            // A new login after a failure: an expired token is the usual cause of a 401.
            match self.connection.client() {
                Ok(c) => self.client = c,
                Err(e) => {
                    tracing::error!(error = %e, "login failed; retrying in 5 s");
                    return;
                }
            }
        }
        let engine = Engine::new(batch.store.cluster(), Options::default());
        let start = Instant::now();
        let result = translate(&engine, &self.options).and_then(|desired| {
            Ok(palisade_neutron_sync::sync(
                &self.client,
                &desired,
                &self.sync_options,
            )?)
        });
        self.failed = match result {
            Ok(report) => self.synced(&report, start),
            Err(e) => {
                self.health.failed(&e.to_string());
                tracing::error!(error = %e, "sync failed; retrying in 5 s");
                true
            }
        };
    }
}

impl NeutronSink {
    /// Reports a sync that ran; returns whether it failed.
    fn synced(&self, report: &Report, start: Instant) -> bool {
        self.health.synced(report);
        for u in &report.unmatched {
            tracing::warn!(pod = %u.pod, "no port: {}", u.reason);
        }
        for u in &report.unplaceable {
            tracing::error!(port = %u.port_id, pods = %u.pods.join(","), "port closed, it cannot be placed: {}", u.reason);
        }
        for g in &report.refused {
            tracing::warn!(group = %g.id, name = %g.name, "not ours, not used: {}", g.reason);
        }
        let ok = report.ok();
        if let Some(a) = report.applied.as_ref().filter(|_| !ok) {
            for e in &a.errors {
                tracing::error!(error = %e, "call failed");
            }
        }
        tracing::info!(
            elapsed_ms = start.elapsed().as_millis() as u64,
            "{}",
            summary(report)
        );
        !ok
    }
}
