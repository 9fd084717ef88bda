//! Where the agent learns the cluster: manifest texts, keyed by where they came from.
//!
//! A source sends [`Event`]s: the texts that are new or changed, the ones that are gone,
//! and [`Event::Synced`] once everything it could list at start has been sent. A *text* is
//! the unit a source owns: a file for the directory source, one object for the Kubernetes
//! source. The agent decodes each text with the model's validation, so both sources report
//! bad input the same way (file or object, line, field).

pub mod dir;
pub mod kube;

/// One manifest text and the name that identifies it in its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    /// A path, or `kube:<Kind>/<namespace>/<name>`: unique within the source, stable
    /// across changes, and used as the `file` of the diagnostics about it.
    pub id: String,
    /// YAML or JSON: any number of objects.
    pub body: String,
}

/// A change a source has seen.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The channel a source sends on; the receiver is the reconcile loop.
pub type Sender = tokio::sync::mpsc::UnboundedSender<Event>;
