//! Why something the kernel half did failed.

use std::io;

/// A kernel operation that failed: what was being done, and why.
#[derive(Debug, thiserror::Error)]
#[error("{op}: {source}")]
pub struct KernelError {
    /// What was being done (`nft -f`, an nf_tables netlink batch, a conntrack dump, …).
    pub op: String,
    /// Why it failed.
    pub source: KernelFailure,
}

/// The cause of a [`KernelError`].
#[derive(Debug, thiserror::Error)]
pub enum KernelFailure {
    /// The command could not be run, or the socket could not be used.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The kernel (or `nft`) refused the change.
    #[error("rejected: {0}")]
    Rejected(String),
}

impl KernelError {
    /// `op` failed with an I/O error.
    pub fn io(op: impl Into<String>, e: io::Error) -> Self {
        Self {
            op: op.into(),
            source: KernelFailure::Io(e),
        }
    }

    /// `op` was refused, with the refusal's text.
    pub fn rejected(op: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            op: op.into(),
            source: KernelFailure::Rejected(why.into()),
        }
    }

    /// Whether the kernel (or `nft`) refused the change, rather than failing to be asked.
    pub fn is_rejected(&self) -> bool {
        matches!(self.source, KernelFailure::Rejected(_))
    }
}
