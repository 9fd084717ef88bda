//! Where a follower learns the cluster: manifest texts, keyed by where they came from.
//!
//! A source sends [`Event`]s: the texts that are new or changed, the ones that are gone,
//! and [`Event::Synced`] once everything it could list at start has been sent. A *text* is
//! the unit a source owns: a file for the directory source, one object for the Kubernetes
//! source. The store decodes each text with the model's validation, so both sources report
//! bad input the same way (file or object, line, field).

pub mod dir;
pub mod kube;

use std::path::{Path, PathBuf};

use tokio::sync::mpsc;

/// One manifest text (or one object) and the name that identifies it in its source.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    /// A path, or `kube:<Kind>/<namespace>/<name>`: unique within the source, stable
    /// across changes, and used as the `file` of the diagnostics about it.
    pub id: String,
    /// What it holds.
    pub body: Content,
}

/// What a [`Text`] holds: YAML or JSON text (a file), or one object as the Kubernetes API
/// gave it (decoded as it is, never rendered as text).
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// YAML or JSON: any number of objects.
    Text(String),
    /// One object.
    Object(serde_json::Value),
}

impl Content {
    /// The body for the model's loader; an object is moved out (`self` keeps `null`).
    pub fn take_body(&mut self) -> palisade_model::Body<'_> {
        match self {
            Content::Text(text) => palisade_model::Body::Text(text),
            Content::Object(value) => palisade_model::Body::Object(std::mem::take(value)),
        }
    }
}

impl From<String> for Content {
    fn from(text: String) -> Content {
        Content::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Content {
        Content::Text(text.to_string())
    }
}

/// A change a source has seen.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// These texts are new or changed (each replaces what its id held before).
    Put(Vec<Text>),
    /// These texts are gone, with every object they held.
    Remove(Vec<String>),
    /// A complete listing of every text whose id starts with `prefix`: texts under the
    /// prefix that are not listed are gone (a relist after a watch expired, a rescan).
    Replace {
        /// The id prefix the listing covers.
        prefix: String,
        /// Every text under it.
        texts: Vec<Text>,
    },
    /// The initial listing is complete: readiness may follow once it is in the kernel.
    Synced,
    /// This text exists but cannot be read now (a file emptied, unreadable, too large, not
    /// UTF-8, a symlink loop): whatever it held stays in force, and the reason is reported.
    Unreadable {
        /// The text's id.
        id: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// Whether one part of the source can read its input (`problem: None`) or not. While a
    /// part cannot, every object it sent stays in force and the agent reports not ready.
    Health {
        /// The part: the directory, or one kind of the Kubernetes source.
        part: String,
        /// Why the part cannot read its input, or `None` once it can again.
        problem: Option<String>,
    },
}

/// The channel a source sends on; the receiver is the follow loop.
pub type Sender = mpsc::UnboundedSender<Event>;

/// Where to follow the cluster from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// A directory of manifests (`dir:PATH`).
    Dir(PathBuf),
    /// The Kubernetes API (`kube`).
    Kube,
}

impl std::fmt::Display for SourceSpec {
    /// As given on the command line: `dir:PATH` or `kube`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceSpec::Dir(path) => write!(f, "dir:{}", path.display()),
            SourceSpec::Kube => f.write_str("kube"),
        }
    }
}

impl std::str::FromStr for SourceSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "kube" => Ok(SourceSpec::Kube),
            _ => match s.strip_prefix("dir:") {
                Some(path) if !path.is_empty() => Ok(SourceSpec::Dir(PathBuf::from(path))),
                _ => Err(format!(
                    "{s:?}: expected dir:PATH (a directory of manifests) or kube"
                )),
            },
        }
    }
}

/// Why a source could not start.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The directory source failed to start.
    #[error(transparent)]
    Dir(#[from] dir::DirError),
    /// No client for the Kubernetes API.
    #[error(transparent)]
    Kube(#[from] kube::KubeError),
}

/// A running source: the events it sends, and what keeps it running.
pub struct Source {
    events: mpsc::UnboundedReceiver<Event>,
    /// Keeps a started source's channel open while its own senders come and go.
    _sender: Option<Sender>,
    _dir: Option<dir::DirSource>,
    client: Option<::kube::Client>,
}

impl Source {
    /// Starts following `spec` (`kubeconfig` and `context` name the cluster of `kube`).
    pub async fn start(
        spec: &SourceSpec,
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Source, SourceError> {
        let (sender, mut source) = Source::channel();
        source._sender = Some(sender.clone());
        match spec {
            SourceSpec::Dir(path) => source._dir = Some(dir::watch(path, sender)?),
            SourceSpec::Kube => {
                let client = kube::client(kubeconfig, context).await?;
                tokio::spawn(kube::run(client.clone(), sender));
                source.client = Some(client);
            }
        }
        Ok(source)
    }

    /// A source fed by hand through the returned sender (tests, benchmarks); it stops
    /// once every sender is dropped.
    pub fn channel() -> (Sender, Source) {
        let (sender, events) = mpsc::unbounded_channel();
        let source = Source {
            events,
            _sender: None,
            _dir: None,
            client: None,
        };
        (sender, source)
    }

    /// The Kubernetes client of a `kube` source.
    pub fn client(&self) -> Option<&::kube::Client> {
        self.client.as_ref()
    }

    /// The next event (`None` once the source has stopped).
    pub async fn recv(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// An event that is already waiting, if any.
    pub fn try_recv(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }
}
