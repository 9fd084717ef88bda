//! What compile must remember between runs: the default policies a tool received when it
//! was first seen, which stay attached when a policy stops being a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The state file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// `group/tool` → the default policies attached when the tool was first compiled.
    #[serde(default)]
    pub default_attachments: BTreeMap<String, Vec<String>>,
}

impl State {
    /// Reads a state file's text (JSON or YAML); an empty text is the empty state.
    pub fn parse(text: &str) -> Result<State, Error> {
        let docs = palisade_model::yaml::parse_documents(text).map_err(Error::StateSyntax)?;
        match docs.into_iter().next() {
            None => Ok(State::default()),
            Some(doc) => serde_json::from_value(doc.value).map_err(Error::StateShape),
        }
    }

    /// The state file's text (YAML, with a comment saying what it is).
    pub fn render(&self) -> Result<String, Error> {
        Ok(format!(
            "# palisade tenancy state: default policies attached to each tool when it was first compiled.\n{}",
            serde_saphyr::to_string(self)?
        ))
    }
}
