//! The one place errors become messages and exit codes: 0 ok, 1 invalid input or a failed
//! operation, 2 usage, 3 found (lint findings at `--fail-on`, `diff` changes).

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use palisade_model::{Diagnostic, LoadError};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The answer to a yes/no question is no (exit 3, nothing printed): `eval --exit-code`
    /// on a denied connection.
    #[error("denied")]
    Denied,
    /// The input loaded but holds nothing the command can analyse (exit 1): a matrix
    /// with no pod that has an address.
    #[error("{0}")]
    Empty(String),
    /// The command line is wrong (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The input is invalid (exit 1); every problem listed.
    #[error("{} error(s) in the input", .0.len())]
    Invalid(Vec<Diagnostic>),
    /// Reading or writing a named file failed (exit 1).
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// Writing to standard output failed (exit 1; a closed pipe is not an error).
    #[error("writing the output: {0}")]
    Output(#[from] io::Error),
    /// The output could not be serialized (exit 1).
    #[error("serializing the output: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The nftables backend failed (exit 1).
    #[error(transparent)]
    Nft(#[from] palisade_nft::NftError),
    /// The Neutron translation failed (exit 1).
    #[error(transparent)]
    Neutron(#[from] palisade_neutron::NeutronError),
    /// A Neutron API call failed (exit 1).
    #[error("Neutron: {0}")]
    NeutronApi(#[from] palisade_neutron_sync::client::ApiError),
    /// No session with Neutron could be had (exit 1).
    #[error(transparent)]
    NeutronAuth(#[from] palisade_neutron_sync::auth::AuthError),
    /// A Neutron sync could not run: a call failed before the plan, or the plan does not
    /// fit the project's quota (exit 1).
    #[error("Neutron: {0}")]
    NeutronSync(#[from] palisade_neutron_sync::SyncError),
    /// A Neutron sync closed ports it cannot place (exit 3; each was reported).
    #[error("{0} port(s) closed because they cannot be placed (listed above)")]
    NeutronUnplaceable(usize),
    /// Some calls of a Neutron sync failed (exit 1; each was reported).
    #[error("{0} Neutron call(s) failed (listed above); the sync stopped after that phase")]
    NeutronFailed(usize),
    /// The Neutron controller could not start (exit 1).
    #[error("neutron controller: {0}")]
    Controller(String),
    /// The lab failed (exit 1).
    #[error(transparent)]
    Lab(#[from] palisade_lab::LabError),
    /// The agent stopped with an error.
    #[error(transparent)]
    Agent(palisade_agent::run::AgentError),
    /// The lab's kernel and the evaluator disagreed on this many probes (exit 1).
    #[error("{0} disagreement(s) between the kernel and the evaluator")]
    Disagreements(usize),
    /// Lint reported invalid objects among its findings (exit 1).
    #[error("{0} invalid object(s) in the input (reported above)")]
    LintInvalid(usize),
    /// Lint found this many findings at or above the `--fail-on` severity (exit 3).
    #[error("{0} finding(s) at or above --fail-on {1}")]
    Findings(usize, &'static str),
    /// A lint baseline file cannot be read as one (exit 1).
    #[error("{}: not a lint baseline: {message}", path.display())]
    Baseline {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A git command for `diff --base` failed (exit 1).
    #[error("{0}")]
    Git(String),
    /// `diff` found differences (exit 3, no message: the output says what they are).
    #[error("the states differ")]
    Differs,
    /// The output could not be written as YAML (exit 1).
    #[error("serializing the output as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
    /// The Kubernetes API could not be read (exit 1).
    #[error("Kubernetes API: {0}")]
    Kube(#[from] palisade_follow::source::kube::KubeError),
    /// A policy's status condition could not be written (exit 1).
    #[error("--report-status: {0}")]
    Status(#[from] palisade_agent::status::StatusError),
    /// The tenancy layer failed (exit 1).
    #[error(transparent)]
    Tenancy(#[from] palisade_tenancy::Error),
    /// A tenancy state file is unreadable (exit 1).
    #[error("{}: {source}", path.display())]
    State {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: palisade_tenancy::Error,
    },
}

impl CliError {
    /// An I/O error on `path`.
    pub fn file(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> CliError {
        let path = path.into();
        move |source| CliError::File { path, source }
    }
}

impl From<LoadError> for CliError {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Invalid(diags) => CliError::Invalid(diags),
            LoadError::Io { path, source } => CliError::File { path, source },
        }
    }
}

/// Prints the error (if any) and picks the exit code. A closed stdout is not an error.
pub fn exit(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(CliError::Denied) => ExitCode::from(3),
        Err(CliError::Usage(msg)) => {
            eprintln!("palisade: error: {msg}");
            ExitCode::from(2)
        }
        Err(e @ CliError::Findings(..)) => {
            eprintln!("palisade: {e}");
            ExitCode::from(3)
        }
        Err(CliError::Differs) => ExitCode::from(3),
        Err(e @ CliError::NeutronUnplaceable(..)) => {
            eprintln!("palisade: {e}");
            ExitCode::from(3)
        }
        Err(CliError::Invalid(diags)) => {
            let n = diags
                .iter()
                .filter(|d| d.severity == palisade_model::Severity::Error)
                .count();
            for d in &diags {
                eprintln!("{d}");
            }
            eprintln!("palisade: {n} error(s) in the input; nothing was evaluated");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("palisade: error: {e}");
            ExitCode::from(1)
        }
    }
}

impl From<palisade_nft::KernelError> for CliError {
    fn from(e: palisade_nft::KernelError) -> Self {
        CliError::Nft(e.into())
    }
}
