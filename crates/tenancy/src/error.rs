//! The tenancy layer's errors.

use palisade_model::Diagnostic;

/// Why a tenancy configuration, option or state could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid; every problem, with file, line and field.
    #[error("{} error(s) in the tenancy configuration", .0.len())]
    Invalid(Vec<Diagnostic>),
    /// A compile option is invalid (it would make NetworkPolicies the API server rejects).
    #[error("invalid {option} option: {message}")]
    Option {
        /// Which option.
        option: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The state file is not YAML.
    #[error("state file: {0}")]
    StateSyntax(#[source] palisade_model::yaml::SyntaxError),
    /// The state file is YAML but not a state.
    #[error("state file: {0}")]
    StateShape(#[source] serde_json::Error),
    /// Output could not be rendered as JSON.
    #[error("cannot render JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// Output could not be rendered as YAML.
    #[error("cannot render YAML: {0}")]
    Render(#[from] serde_saphyr::SerializeError),
}

impl Error {
    /// The configuration errors, if that is what this is.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            Error::Invalid(d) => d,
            _ => &[],
        }
    }
}
