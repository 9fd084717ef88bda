//! The one place errors become messages and exit codes: 0 ok, 1 invalid input, 2 usage.

use std::process::ExitCode;

use palisade_model::{Diagnostic, LoadError};

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong (exit 2).
    Usage(String),
    /// The input is invalid (exit 1); every problem listed.
    Invalid(Vec<Diagnostic>),
    /// Anything else that stops the command (exit 1).
    Failed(String),
}

impl From<LoadError> for CliError {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Invalid(diags) => CliError::Invalid(diags),
            io @ LoadError::Io { .. } => CliError::Failed(io.to_string()),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Failed(e.to_string())
    }
}

/// Prints the error (if any) and picks the exit code. A closed stdout is not an error.
pub fn exit(result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Failed(msg)) if msg.contains("Broken pipe") => ExitCode::SUCCESS,
        Err(CliError::Usage(msg)) => {
            eprintln!("palisade: error: {msg}");
            ExitCode::from(2)
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
        Err(CliError::Failed(msg)) => {
            eprintln!("palisade: error: {msg}");
            ExitCode::from(1)
        }
    }
}
