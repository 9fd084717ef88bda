//! The Kubernetes source: watches the API server for the kinds in [`RESOURCES`] and sends each
//! object as one [`Text`] with the id `kube:<Kind>/<namespace>/<name>` (cluster-scoped
//! kinds: `kube:<Kind>/<name>`), its body the object itself ([`Content::Object`]) cut down
//! to the fields Palisade reads.
//!
//! Each kind runs a kube-runtime watcher: list, then watch from the list's
//! `resourceVersion` with bookmarks, resuming from the last version seen after a
//! disconnect. A complete listing (the first, and any relist after the API server
//! answered `410 Gone`) is sent as [`Event::Replace`] over the kind's prefix; changes
//! as [`Event::Put`] and [`Event::Remove`]; [`Event::Synced`] once every kind was listed.
//! A policy kind whose CRD is not installed (`404` on list) and that was not served since
//! the source started is logged as a notice, counts as listed and empty, and is tried again
//! every [`Options::missing_retry`].
//!
//! Fail closed: an error on a list or watch never removes objects. A kind that was served
//! and now fails (an error, or a `404` while an API server restarts or a CRD is upgraded)
//! keeps its objects in force, is reported as [`Event::Health`] (the agent is not ready),
//! and is retried with backoff. Only discovery saying, for [`Options::unserved_grace`] in a
//! row, that the group/version no longer serves the resource drops its objects, with an
//! error, and the kind stays reported until it is served again.
//!
//! [`snapshot`] lists every kind once, for the analysis commands.

mod trim;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use kube::runtime::watcher;

use super::{Content, Event, Sender, Text};

/// An API resource the source reads: its group, version, kind and resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// The kind, as in `kind:`.
    pub kind: &'static str,
    /// The resource name in URLs and RBAC rules.
    pub plural: &'static str,
    /// Served by a CRD that a cluster may not have installed.
    pub optional: bool,
}

/// Every resource the source reads; the deployment's ClusterRole grants exactly these.
pub const RESOURCES: [Resource; 9] = [
    Resource {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        optional: false,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        optional: false,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        optional: false,
    },
    Resource {
        group: "networking.k8s.io",
        version: "v1",
        kind: "NetworkPolicy",
        plural: "networkpolicies",
        optional: false,
    },
    Resource {
        group: "policy.networking.k8s.io",
        version: "v1alpha1",
        kind: "AdminNetworkPolicy",
        plural: "adminnetworkpolicies",
        optional: true,
    },
    Resource {
        group: "policy.networking.k8s.io",
        version: "v1alpha1",
        kind: "BaselineAdminNetworkPolicy",
        plural: "baselineadminnetworkpolicies",
        optional: true,
    },
    Resource {
        group: "policy.networking.k8s.io",
        version: "v1alpha2",
        kind: "ClusterNetworkPolicy",
        plural: "clusternetworkpolicies",
        optional: true,
    },
    Resource {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        optional: false,
    },
    Resource {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        optional: false,
    },
];

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The id prefix of every text of this kind: `kube:<Kind>/`.
    pub fn prefix(&self) -> String {
        format!("kube:{}/", self.kind)
    }

    /// The id of the object `namespace/name` (or `name` when cluster-scoped).
    pub fn id(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) => format!("kube:{}/{ns}/{name}", self.kind),
            None => format!("kube:{}/{name}", self.kind),
        }
    }

    fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_string(),
            version: self.version.to_string(),
            api_version: self.api_version(),
            kind: self.kind.to_string(),
            plural: self.plural.to_string(),
        }
    }

    /// An API over every namespace (list and watch of all objects of the kind).
    fn api(&self, client: kube::Client) -> Api<DynamicObject> {
        Api::all_with(client, &self.resource())
    }

    fn object_id(&self, obj: &DynamicObject) -> String {
        let name = obj.metadata.name.as_deref().unwrap_or_default();
        self.id(obj.metadata.namespace.as_deref(), name)
    }

    /// The object under its id, trimmed to what the decoder reads (never rendered as text).
    fn text(&self, obj: &DynamicObject) -> Text {
        // Serialising a `DynamicObject` cannot fail (string keys only); a `Null` would
        // still be reported by the decoder rather than dropped.
        let value = serde_json::to_value(obj).unwrap_or_default();
        Text {
            id: self.object_id(obj),
            body: Content::Object(trim::trim(&self.api_version(), self.kind, &value)),
        }
    }
}

/// Why the Kubernetes API cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig file given could not be read or used.
    #[error("{path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: KubeconfigError,
    },
    /// The kubeconfig found through `KUBECONFIG` or `~/.kube/config` could not be used
    /// (with `--context`).
    #[error("kubeconfig: {0}")]
    Context(#[source] KubeconfigError),
    /// Neither a kubeconfig nor an in-cluster service account was found.
    #[error("no Kubernetes configuration (kubeconfig or in-cluster service account): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("cannot create the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// Listing a kind failed.
    #[error("cannot list {kind}: {}", chain(source))]
    List {
        /// The kind.
        kind: &'static str,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// No async runtime could be started (for [`snapshot_blocking`]).
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// An error and its causes, `: `-separated (a connection error's cause says which).
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = e.source();
    }
    out
}

/// A client for the cluster named by `kubeconfig` and `context`: that file, or else
/// `KUBECONFIG` / `~/.kube/config`, or else (running in a pod, neither given nor found)
/// the pod's service account.
///
/// A response that does not come within 5 minutes (longer than a watch lasts before the
/// server ends it) is an error, so a list from a hung API server is retried.
pub async fn client(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<kube::Client, KubeError> {
    connect(kubeconfig, context, Duration::from_secs(300)).await
}

/// [`client`] with the given response timeout.
async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    read_timeout: Duration,
) -> Result<kube::Client, KubeError> {
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let mut config = match kubeconfig {
        Some(path) => {
            let wrap = |source| KubeError::Kubeconfig {
                path: path.to_path_buf(),
                source,
            };
            let file = Kubeconfig::read_from(path).map_err(wrap)?;
            kube::Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(wrap)?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(KubeError::Context)?,
        None => kube::Config::infer().await.map_err(KubeError::Infer)?,
    };
    config.read_timeout = Some(read_timeout);
    // The timeout counts from the request, not from when a pooled connection went idle.
    config.reset_reader_on_write = true;
    kube::Client::try_from(config).map_err(KubeError::Client)
}

/// Every object of every kind, listed once.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// One text per object.
    pub texts: Vec<Text>,
    /// The optional kinds the cluster does not serve (CRD not installed).
    pub missing: Vec<&'static str>,
}

/// Lists every kind in [`RESOURCES`] once (paginated). A kind whose CRD is not installed is
/// recorded in [`Snapshot::missing`]; any other failure is an error.
pub async fn snapshot(client: &kube::Client) -> Result<Snapshot, KubeError> {
    let mut out = Snapshot::default();
    for kind in &RESOURCES {
        let api = kind.api(client.clone());
        let mut params = ListParams::default().limit(500);
        loop {
            match api.list(&params).await {
                Ok(list) => {
                    out.texts.extend(list.items.iter().map(|o| kind.text(o)));
                    match list.metadata.continue_.filter(|c| !c.is_empty()) {
                        Some(token) => params.continue_token = Some(token),
                        None => break,
                    }
                }
                Err(e) if kind.optional && status_code(&e) == Some(404) => {
                    out.missing.push(kind.kind);
                    break;
                }
                Err(source) => {
                    return Err(KubeError::List {
                        kind: kind.kind,
                        source,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// [`client`] then [`snapshot`], on a runtime of its own: for synchronous callers (the
/// analysis commands; not from inside an async runtime). A response that does not come
/// within a minute is an error.
pub fn snapshot_blocking(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
) -> Result<Snapshot, KubeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(KubeError::Runtime)?;
    runtime.block_on(async {
        let client = connect(kubeconfig, context, Duration::from_secs(60)).await?;
        snapshot(&client).await
    })
}

/// Timings of the watch loop.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often a kind whose CRD is not installed is tried again.
    pub missing_retry: Duration,
    /// The first wait after an error; it doubles with each error in a row.
    pub min_backoff: Duration,
    /// The longest wait after an error.
    pub max_backoff: Duration,
    /// How long discovery must keep saying that a kind which was served is gone before
    /// its objects are dropped.
    pub unserved_grace: Duration,
    /// How long a list may take before the kind is reported as not reading (a list that
    /// hangs keeps every object in force, but must not leave the agent ready).
    pub list_deadline: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            missing_retry: Duration::from_secs(300),
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            unserved_grace: Duration::from_secs(60),
            list_deadline: Duration::from_secs(60),
        }
    }
}

/// Follows the cluster with the default [`Options`] until the receiver of `tx` is dropped.
pub async fn run(client: kube::Client, tx: Sender) {
    run_with(client, tx, Options::default()).await;
}

/// Follows the cluster until the receiver of `tx` is dropped. API errors are logged and
/// retried with backoff; they never end the source.
pub async fn run_with(client: kube::Client, tx: Sender, options: Options) {
    let unlisted = AtomicUsize::new(RESOURCES.len());
    let watches = RESOURCES
        .iter()
        .map(|kind| follow(kind, client.clone(), &tx, &unlisted, &options));
    futures::future::join_all(watches).await;
}

/// What a watcher error asks of the loop.
enum Recovery {
    /// The CRD is not installed: the kind is empty until a later try finds it.
    Missing,
    /// Start a new watcher (a fresh list).
    Relist,
    /// Wait, then let the watcher resume by itself.
    Backoff,
}

/// The most watch events merged into one batch.
const BATCH: usize = 1024;

/// Watches one kind, sending its events, until the receiver is dropped. Events that
/// arrive together (a burst, such as a rollout's pods) are merged: consecutive changes
/// become one [`Event::Put`] or [`Event::Remove`].
async fn follow(
    kind: &'static Resource,
    client: kube::Client,
    tx: &Sender,
    unlisted: &AtomicUsize,
    options: &Options,
) {
    let api = kind.api(client.clone());
    let mut state = Follow {
        kind,
        tx,
        unlisted,
        client: client.clone(),
        listed: false,
        served: false,
        unserved_since: None,
        listing_since: None,
        problem: None,
        errors: 0,
        missing_reported: false,
        buffer: Vec::new(),
    };
    // Bookmarks on (the default), so that a resumed watch starts from a recent version.
    // Lists are consistent reads (`ListSemantic::MostRecent`, the default), not "any
    // cached version": after a relist, a stale cache could bring back a deleted or older
    // policy, and an enforcing agent must not move backwards in time.
    let config = watcher::Config::default();
    loop {
        // Every item the watcher has ready, up to BATCH, without waiting for more.
        let mut stream = watcher(api.clone(), config.clone())
            .ready_chunks(BATCH)
            .boxed();
        state.buffer.clear();
        state.listing_since = Some(tokio::time::Instant::now());
        loop {
            let chunk = tokio::select! {
                () = tx.closed() => return,
                chunk = stream.next() => chunk,
                () = overdue(state.listing_since, options.list_deadline) => {
                    state.listing_since = None;
                    let problem = format!(
                        "a list has not completed within {} s",
                        options.list_deadline.as_secs_f64()
                    );
                    if !state.unhealthy(problem) {
                        return;
                    }
                    continue;
                }
            };
            // The watcher's stream never ends; if it did, start over.
            let Some(chunk) = chunk else { break };
            let mut batch = Batch::default();
            let mut step = Step::Continue;
            for item in chunk {
                match item {
                    Ok(event) => state.apply(event, &mut batch),
                    Err(e) => {
                        // What came before the error goes out before any wait.
                        if !state.send(batch.take()) {
                            return;
                        }
                        step = state.recover(&e, options).await;
                        if !matches!(step, Step::Continue) {
                            break;
                        }
                    }
                }
            }
            if !state.send(batch.take()) {
                return;
            }
            match step {
                Step::Continue => {}
                Step::Restart => break,
                Step::Stop => return,
            }
        }
    }
}

/// What the watch loop does after an error.
enum Step {
    /// Go on with the same watcher.
    Continue,
    /// Start a new watcher (a fresh list).
    Restart,
    /// The receiver is gone.
    Stop,
}

/// The state of one kind's watch loop.
struct Follow<'a> {
    kind: &'static Resource,
    tx: &'a Sender,
    unlisted: &'a AtomicUsize,
    client: kube::Client,
    /// Whether the first listing was sent.
    listed: bool,
    /// Whether the API server served the kind since the source started.
    served: bool,
    /// Since when discovery has said that the kind, once served, is gone.
    unserved_since: Option<std::time::Instant>,
    /// Since when a list has been under way, if one is.
    listing_since: Option<tokio::time::Instant>,
    /// The problem reported as [`Event::Health`], if any.
    problem: Option<String>,
    /// Errors in a row.
    errors: u32,
    /// Whether the kind is known not to be served.
    missing_reported: bool,
    /// The listing being received.
    buffer: Vec<Text>,
}

impl Follow<'_> {
    /// Turns a watcher event into source events.
    fn apply(&mut self, event: watcher::Event<DynamicObject>, batch: &mut Batch) {
        let kind = self.kind;
        match event {
            watcher::Event::Init => {
                self.buffer.clear();
                self.listing_since = Some(tokio::time::Instant::now());
            }
            watcher::Event::InitApply(obj) => self.buffer.push(kind.text(&obj)),
            watcher::Event::InitDone => {
                self.errors = 0;
                self.served = true;
                self.unserved_since = None;
                self.listing_since = None;
                if self.missing_reported {
                    tracing::info!(kind = kind.kind, "now served by the API server");
                    self.missing_reported = false;
                }
                let texts = std::mem::take(&mut self.buffer);
                tracing::debug!(kind = kind.kind, objects = texts.len(), "listed");
                batch.push(Event::Replace {
                    prefix: kind.prefix(),
                    texts,
                });
                self.healthy(batch);
            }
            watcher::Event::Apply(obj) => {
                self.errors = 0;
                batch.push(Event::Put(vec![kind.text(&obj)]));
                self.healthy(batch);
            }
            watcher::Event::Delete(obj) => {
                self.errors = 0;
                batch.push(Event::Remove(vec![kind.object_id(&obj)]));
                self.healthy(batch);
            }
        }
    }

    /// Clears a reported problem: the kind reads again.
    fn healthy(&mut self, batch: &mut Batch) {
        if self.problem.take().is_some() {
            tracing::info!(kind = self.kind.kind, "reading again");
            batch.push(Event::Health {
                part: self.part(),
                problem: None,
            });
        }
    }

    /// Reports that the kind cannot be read (once per distinct problem); false if the
    /// receiver is gone.
    fn unhealthy(&mut self, problem: String) -> bool {
        if self.problem.as_ref() == Some(&problem) {
            return true;
        }
        tracing::error!(kind = self.kind.kind, %problem, "cannot read; its objects stay in force");
        self.problem = Some(problem.clone());
        self.tx
            .send(Event::Health {
                part: self.part(),
                problem: Some(problem),
            })
            .is_ok()
    }

    fn part(&self) -> String {
        format!("kube:{}", self.kind.kind)
    }

    /// Whether discovery still lists the kind's resource in its group/version: `Some(false)`
    /// only when it answers and the resource is not there.
    async fn discovered(&self) -> Option<bool> {
        match self
            .client
            .list_api_group_resources(&self.kind.api_version())
            .await
        {
            Ok(list) => Some(list.resources.iter().any(|r| r.name == self.kind.plural)),
            Err(e) if status_code(&e) == Some(404) => Some(false),
            Err(_) => None,
        }
    }

    /// Sends `events`; false if the receiver is gone. The first listing of the kind
    /// counts towards [`Event::Synced`].
    fn send(&mut self, events: Vec<Event>) -> bool {
        for event in events {
            let listing = matches!(event, Event::Replace { .. });
            if self.tx.send(event).is_err() {
                return false;
            }
            if listing {
                self.mark_listed();
            }
        }
        true
    }

    /// Counts the first complete listing of the kind; the last kind to be listed sends
    /// [`Event::Synced`].
    fn mark_listed(&mut self) {
        if !self.listed {
            self.listed = true;
            if self.unlisted.fetch_sub(1, Ordering::AcqRel) == 1 {
                let _ = self.tx.send(Event::Synced);
            }
        }
    }

    /// Logs a watcher error and waits as it asks.
    async fn recover(&mut self, error: &watcher::Error, options: &Options) -> Step {
        let kind = self.kind;
        let tx = self.tx;
        let waited = match recovery(kind, error) {
            Recovery::Missing if self.served => {
                // Served before: a restart or a CRD upgrade answers 404 for a while. Keep
                // everything; only discovery saying it is gone, for the grace period, drops it.
                let gone = self.discovered().await == Some(false);
                if !gone {
                    self.unserved_since = None;
                }
                let since = gone.then(|| {
                    *self
                        .unserved_since
                        .get_or_insert_with(std::time::Instant::now)
                });
                if since.is_some_and(|s| s.elapsed() >= options.unserved_grace) {
                    tracing::error!(
                        kind = kind.kind,
                        api_version = %kind.api_version(),
                        "no longer served by the API server (discovery agrees); its objects are removed"
                    );
                    let replace = Event::Replace {
                        prefix: kind.prefix(),
                        texts: Vec::new(),
                    };
                    if !self.send(vec![replace]) {
                        return Step::Stop;
                    }
                    self.served = false;
                    self.missing_reported = true;
                    self.unserved_since = None;
                    if !self.unhealthy(format!(
                        "{} is no longer served by the API server; its objects were removed",
                        kind.api_version()
                    )) {
                        return Step::Stop;
                    }
                    pause(tx, options.missing_retry).await
                } else {
                    if !self.unhealthy(format!(
                        "list answered 404 Not Found for a kind that was served{}",
                        if gone {
                            " (discovery does not list it either)"
                        } else {
                            ""
                        }
                    )) {
                        return Step::Stop;
                    }
                    let wait = backoff(options, self.errors);
                    self.errors = self.errors.saturating_add(1);
                    pause(tx, wait).await
                }
            }
            Recovery::Missing => {
                if self.missing_reported {
                    tracing::debug!(kind = kind.kind, "still not served");
                } else {
                    tracing::info!(
                        kind = kind.kind,
                        api_version = %kind.api_version(),
                        retry_secs = options.missing_retry.as_secs(),
                        "not served by the API server (CRD not installed); treated as empty"
                    );
                    self.missing_reported = true;
                    // Whatever was held of the kind is gone (a CRD deleted).
                    let replace = Event::Replace {
                        prefix: kind.prefix(),
                        texts: Vec::new(),
                    };
                    if !self.send(vec![replace]) {
                        return Step::Stop;
                    }
                }
                self.mark_listed();
                pause(tx, options.missing_retry).await
            }
            Recovery::Relist => {
                tracing::info!(kind = kind.kind, %error, "watch expired; relisting");
                // Bounds the relist rate if the server keeps answering 410.
                pause(tx, options.min_backoff).await
            }
            Recovery::Backoff => {
                let wait = backoff(options, self.errors);
                self.errors = self.errors.saturating_add(1);
                if !self.unhealthy(format!("{error}")) {
                    return Step::Stop;
                }
                tracing::warn!(
                    kind = kind.kind,
                    %error,
                    retry_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    "watch failed; listing again"
                );
                // A fresh list: its completion is what says the kind reads again.
                pause(tx, wait).await
            }
        };
        if waited { Step::Restart } else { Step::Stop }
    }
}

/// Source events in order, consecutive changes merged.
#[derive(Debug, Default)]
struct Batch {
    events: Vec<Event>,
}

impl Batch {
    /// Appends `event`, merging it into the last one when both are puts or both removes
    /// (a later text for the same id replaces the earlier one in place).
    fn push(&mut self, event: Event) {
        match (self.events.last_mut(), event) {
            (Some(Event::Put(held)), Event::Put(texts)) => {
                for text in texts {
                    match held.iter_mut().find(|t| t.id == text.id) {
                        Some(old) => *old = text,
                        None => held.push(text),
                    }
                }
            }
            (Some(Event::Remove(held)), Event::Remove(ids)) => {
                for id in ids {
                    if !held.contains(&id) {
                        held.push(id);
                    }
                }
            }
            (_, event) => self.events.push(event),
        }
    }

    /// The events so far, leaving the batch empty.
    fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

/// Resolves `deadline` after `since`; never without a start.
async fn overdue(since: Option<tokio::time::Instant>, deadline: Duration) {
    match since {
        Some(since) => tokio::time::sleep_until(since + deadline).await,
        None => std::future::pending().await,
    }
}

/// Waits `wait`; false if the receiver went away meanwhile.
async fn pause(tx: &Sender, wait: Duration) -> bool {
    tokio::select! {
        () = tx.closed() => false,
        () = tokio::time::sleep(wait) => true,
    }
}

/// The wait after `errors` errors in a row.
fn backoff(options: &Options, errors: u32) -> Duration {
    let factor = 1u32.checked_shl(errors.min(16)).unwrap_or(u32::MAX);
    options
        .min_backoff
        .saturating_mul(factor)
        .min(options.max_backoff)
}

/// How to recover from a watcher error.
fn recovery(kind: &Resource, error: &watcher::Error) -> Recovery {
    match error {
        // "404 Not Found" on list: the resource is not served (a CRD not installed).
        watcher::Error::InitialListFailed(e) if kind.optional && status_code(e) == Some(404) => {
            Recovery::Missing
        }
        // The API server refused to start a watch at a version it no longer has
        // ("410 Gone" as the response status rather than as a watch event): the watcher
        // would retry the same version, so start over with a list.
        watcher::Error::WatchStartFailed(e) if status_code(e) == Some(410) => Recovery::Relist,
        // A `410 Gone` watch event: the watcher relists by itself on the next poll.
        watcher::Error::WatchError(status) if status.code == 410 => Recovery::Relist,
        _ => Recovery::Backoff,
    }
}

/// The HTTP status of an API error response.
fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_prefixes() {
        let pod = &RESOURCES[1];
        assert_eq!(pod.id(Some("x"), "a"), "kube:Pod/x/a");
        assert!(pod.id(Some("x"), "a").starts_with(&pod.prefix()));
        let anp = &RESOURCES[4];
        assert_eq!(anp.id(None, "p"), "kube:AdminNetworkPolicy/p");
        assert_eq!(anp.api_version(), "policy.networking.k8s.io/v1alpha1");
        assert_eq!(RESOURCES[0].api_version(), "v1");
    }

    #[test]
    fn prefixes_do_not_overlap() {
        for a in &RESOURCES {
            for b in &RESOURCES {
                if a != b {
                    assert!(
                        !a.prefix().starts_with(&b.prefix()),
                        "{} inside {}",
                        a.kind,
                        b.kind
                    );
                }
            }
        }
    }

    fn put(ids: &[&str], body: &str) -> Event {
        Event::Put(
            ids.iter()
                .map(|id| Text {
                    id: (*id).to_string(),
                    body: body.into(),
                })
                .collect(),
        )
    }

    #[test]
    fn batches_merge_consecutive_changes_in_order() {
        let mut b = Batch::default();
        b.push(put(&["a"], "1"));
        b.push(put(&["b"], "1"));
        b.push(put(&["a"], "2"));
        b.push(Event::Remove(vec!["b".into()]));
        b.push(Event::Remove(vec!["c".into()]));
        b.push(Event::Remove(vec!["b".into()]));
        b.push(put(&["b"], "3"));
        b.push(Event::Replace {
            prefix: "p".into(),
            texts: Vec::new(),
        });
        b.push(put(&["d"], "1"));
        let a2 = Text {
            id: "a".into(),
            body: "2".into(),
        };
        let b1 = Text {
            id: "b".into(),
            body: "1".into(),
        };
        assert_eq!(
            b.take(),
            [
                Event::Put(vec![a2, b1]),
                Event::Remove(vec!["b".into(), "c".into()]),
                put(&["b"], "3"),
                Event::Replace {
                    prefix: "p".into(),
                    texts: Vec::new()
                },
                put(&["d"], "1"),
            ],
            "a later text replaces an earlier one in place; a put after a remove stays after it"
        );
        assert!(b.take().is_empty());
    }

    #[test]
    fn backoff_doubles_up_to_the_limit() {
        let o = Options {
            missing_retry: Duration::from_secs(1),
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            unserved_grace: Duration::from_secs(1),
            list_deadline: Duration::from_secs(1),
        };
        let waits: Vec<u128> = (0..6).map(|n| backoff(&o, n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(&o, u32::MAX), Duration::from_secs(1));
    }
}
