//! The line of a finding's field: the manifests are read again for their line maps (the
//! compiled objects keep only the line each object starts on).

use std::collections::HashMap;

use palisade_model::yaml::{AliasBudget, LineMap, parse_stream};
use serde_json::Value;

use super::Finding;

/// Where every object of some texts starts, with the lines of its fields.
#[derive(Debug, Default)]
pub struct FieldLines {
    /// File name → (object line, path of the object in its document, the document's lines).
    objects: HashMap<String, Vec<(usize, String, usize)>>,
    documents: Vec<LineMap>,
}

impl FieldLines {
    /// Reads the line maps of named texts (the `(name, text)` pairs the loader read).
    pub fn new<'a>(sources: impl IntoIterator<Item = (&'a str, &'a str)>) -> FieldLines {
        let mut out = FieldLines::default();
        let budget = AliasBudget::default();
        for (name, text) in sources {
            for doc in parse_stream(text, &budget).documents {
                let d = out.documents.len();
                let entries = out.objects.entry(name.to_string()).or_default();
                flatten(&doc.value, &doc.lines, String::new(), doc.line, d, entries);
                out.documents.push(doc.lines);
            }
        }
        out
    }

    /// Moves each finding's line from its object's first line to its field's line.
    pub fn refine(&self, findings: &mut [Finding]) {
        for f in findings.iter_mut().filter(|f| !f.field.is_empty()) {
            let Some(file) = &f.file else { continue };
            let Some(objects) = self.objects.get(file.as_str()) else {
                continue;
            };
            let Some((_, prefix, d)) = objects.iter().find(|(line, _, _)| *line == f.line) else {
                continue;
            };
            let path = if prefix.is_empty() {
                f.field.clone()
            } else {
                format!("{prefix}.{}", f.field)
            };
            if let Some(line) = self.documents[*d].line_of(&path) {
                f.line = line;
            }
        }
    }
}

/// The objects of a document, as the loader reads them: itself, or a List's items.
fn flatten(
    value: &Value,
    lines: &LineMap,
    prefix: String,
    line: usize,
    d: usize,
    out: &mut Vec<(usize, String, usize)>,
) {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let is_list = kind == "List" || (kind.ends_with("List") && value.get("items").is_some());
    if !is_list || value.get("apiVersion").and_then(Value::as_str).is_none() {
        out.push((line, prefix, d));
        return;
    }
    let items = value.get("items").and_then(Value::as_array);
    for (i, item) in items.into_iter().flatten().enumerate() {
        let p = if prefix.is_empty() {
            format!("items[{i}]")
        } else {
            format!("{prefix}.items[{i}]")
        };
        let at = lines.line_of(&p).unwrap_or(line);
        flatten(item, lines, p, at, d, out);
    }
}
