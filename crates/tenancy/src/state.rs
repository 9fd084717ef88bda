//! What compile must remember between runs: the default policies a tool received when it
//! was first seen, which stay attached when a policy stops being a default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The state file's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// `group/tool` → the default policies attached when the tool was first compiled.
    #[serde(default)]
    pub default_attachments: BTreeMap<String, Vec<String>>,
}

impl State {
    /// Reads a state file's text (JSON or YAML).
    pub fn parse(text: &str) -> Result<State, String> {
        let docs = palisade_model::yaml::parse_documents(text).map_err(|e| e.to_string())?;
        match docs.into_iter().next() {
            None => Ok(State::default()),
            Some(doc) => serde_json::from_value(doc.value).map_err(|e| e.to_string()),
        }
    }

    /// The state file's text (YAML).
    pub fn render(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or_default();
        format!(
            "# palisade tenancy state: default policies attached to each tool when it was first compiled.\n{}",
            palisade_model::yaml::to_yaml(&value)
        )
    }
}
