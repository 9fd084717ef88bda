//! The line of a finding's field: the manifests are read again for their line maps (the
//! compiled objects keep only the line each object starts on).

use std::collections::HashMap;

use palisade_model::yaml::{AliasBudget, LineMap, parse_stream};
use serde_json::Value;

use super::Finding;

/// Where every object of some texts starts, with the lines of its fields and its
/// [`super::IGNORE_ANNOTATION`].
#[derive(Debug, Default)]
pub struct FieldLines {
    /// File name → (object line, path of the object in its document, the document's lines).
    objects: HashMap<String, Vec<(usize, String, usize)>>,
    documents: Vec<LineMap>,
    /// (file, object line) → the value of its lint-ignore annotation.
    ignores: HashMap<(String, usize), String>,
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
                let first = entries.len();
                flatten(&doc.value, &doc.lines, String::new(), doc.line, d, entries);
                for (line, path, _) in &entries[first..] {
                    let object = if path.is_empty() {
                        Some(&doc.value)
                    } else {
                        object_at(&doc.value, path)
                    };
                    let ignore = object
                        .and_then(|o| o.get("metadata"))
                        .and_then(|m| m.get("annotations"))
                        .and_then(|a| a.get(super::IGNORE_ANNOTATION))
                        .and_then(Value::as_str);
                    if let Some(v) = ignore {
                        out.ignores.insert((name.to_string(), *line), v.to_string());
                    }
                }
                out.documents.push(doc.lines);
            }
        }
        out
    }

    /// The lint-ignore annotation of the object read at `file`:`line`, if it has one.
    pub fn ignore_of(&self, file: &str, line: usize) -> Option<&str> {
        self.ignores
            .get(&(file.to_string(), line))
            .map(String::as_str)
    }

    /// Every lint-ignore annotation: (file, object line, value).
    pub fn ignores(&self) -> impl Iterator<Item = (&str, usize, &str)> {
        self.ignores
            .iter()
            .map(|((f, l), v)| (f.as_str(), *l, v.as_str()))
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

/// The object at `items[0].items[3]`-style `path` inside a document.
fn object_at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    let mut v = value;
    for part in path.split('.') {
        let i: usize = part
            .strip_prefix("items[")?
            .strip_suffix(']')?
            .parse()
            .ok()?;
        v = v.get("items")?.get(i)?;
    }
    Some(v)
}
