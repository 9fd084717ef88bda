//! Text renderings of a compile's [`Output`]. YAML goes through serde-saphyr, which quotes
//! and escapes every string that could otherwise be read as structure, so no name in the
//! configuration can add a document or break the output.

use crate::compile::Output;
use crate::error::Error;

impl Output {
    /// The NetworkPolicies as multi-document YAML (each document after `---`), preceded by
    /// the labels each tool's pods must carry, as comments.
    pub fn to_yaml(&self) -> Result<String, Error> {
        let mut text = String::from("# Labels each tool's pods must carry (group/tool):\n");
        for (tool, labels) in &self.tool_labels {
            let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            // Names and labels are validated; escaping keeps a comment one line regardless.
            let line = format!("{tool}: {}", pairs.join(","));
            text += &format!("#   {}\n", line.escape_debug());
        }
        for np in &self.network_policies {
            text += "---\n";
            text += &serde_saphyr::to_string(np)?;
        }
        Ok(text)
    }

    /// The labels each tool's pods must carry, as YAML: `group/tool` → labels.
    pub fn labels_yaml(&self) -> Result<String, Error> {
        Ok(serde_saphyr::to_string(&self.tool_labels)?)
    }

    /// The NetworkPolicies as a `v1 List`, pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, Error> {
        let list = serde_json::json!({
            "apiVersion": "v1",
            "kind": "List",
            "items": serde_json::to_value(&self.network_policies).map_err(Error::Json)?,
        });
        serde_json::to_string_pretty(&list).map_err(Error::Json)
    }
}
