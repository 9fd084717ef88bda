//! YAML (and JSON, its subset) documents into JSON values plus a map from field path to line.
//!
//! Kubernetes reads manifests as YAML 1.2-ish documents and converts them to JSON before
//! decoding; we do the same, and remember where every field came from so that every later
//! error can name its line.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};

/// One YAML document: its JSON value, the line it starts on, and where each field is.
#[derive(Debug, Clone)]
pub struct Document {
    /// The document's content.
    pub value: Value,
    /// Line (1-based) of the document's first node.
    pub line: usize,
    /// Line of every field and list item, by path (`spec.ingress[0].from`).
    pub lines: LineMap,
}

/// Field path → 1-based line of the node at that path.
#[derive(Debug, Clone, Default)]
pub struct LineMap(HashMap<String, usize>);

impl LineMap {
    /// The line of `path`, or of its nearest ancestor that has one.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(l) = self.0.get(p) {
                return Some(*l);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

/// A syntax error in a YAML document.
#[derive(Debug, Clone, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct SyntaxError {
    /// 1-based line.
    pub line: usize,
    /// What the parser said.
    pub message: String,
}

/// Parses every document of `text`. Empty documents (`---` with nothing after) are dropped.
pub fn parse_documents(text: &str) -> Result<Vec<Document>, SyntaxError> {
    let mut builder = Builder::default();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| SyntaxError {
            line: e.marker().line(),
            message: e.info().to_string(),
        })?;
        builder.event(event, span)?;
    }
    Ok(builder.documents)
}

/// Documents larger than this once aliases are expanded are refused (a "billion laughs"
/// document must not exhaust memory).
const MAX_NODES: usize = 1_000_000;

/// Deeper documents are refused (no Kubernetes object is nearly this deep).
const MAX_DEPTH: usize = 128;

#[derive(Default)]
struct Builder {
    documents: Vec<Document>,
    stack: Vec<Frame>,
    lines: LineMap,
    anchors: HashMap<usize, Value>,
    /// Nodes in the current document, aliases counted at their expanded size.
    nodes: usize,
    doc_line: usize,
}

enum Frame {
    Seq {
        path: String,
        items: Vec<Value>,
        anchor: usize,
    },
    Map {
        path: String,
        map: Map<String, Value>,
        /// The pending key and the line it is on (a field's line is its key's).
        key: Option<(String, usize)>,
        anchor: usize,
    },
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let line = span.start.line();
        match event {
            Event::DocumentStart(_) => {
                self.lines = LineMap::default();
                self.anchors.clear();
                self.nodes = 0;
                self.doc_line = line;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let is_key = matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
                if is_key {
                    if let Some(Frame::Map { key, .. }) = self.stack.last_mut() {
                        *key = Some((text.into_owned(), line));
                    }
                    return Ok(());
                }
                let forced_string = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !forced_string {
                    plain_scalar(&text)
                } else {
                    Value::String(text.into_owned())
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push_value(value, line);
            }
            Event::Alias(id) => {
                let size = self.anchors.get(&id).map_or(0, node_count);
                self.nodes += size;
                if self.nodes > MAX_NODES {
                    return Err(SyntaxError {
                        line,
                        message: format!("more than {MAX_NODES} nodes once aliases are expanded"),
                    });
                }
                let value = self.anchors.get(&id).cloned().ok_or(SyntaxError {
                    line,
                    message: format!("unknown alias {id}"),
                })?;
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = self.stack.last_mut()
                {
                    *key = Some((scalar_key(&value), line));
                    return Ok(());
                }
                self.push_value(value, line);
            }
            Event::SequenceStart(anchor, _) => {
                let path = self.child_path(line)?;
                self.stack.push(Frame::Seq {
                    path,
                    items: Vec::new(),
                    anchor,
                });
            }
            Event::MappingStart(anchor, _) => {
                let path = self.child_path(line)?;
                self.stack.push(Frame::Map {
                    path,
                    map: Map::new(),
                    key: None,
                    anchor,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { items, anchor, .. }) => (Value::Array(items), anchor),
                    Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
                    None => return Ok(()),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.attach(value);
            }
            Event::DocumentEnd | Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
        Ok(())
    }

    /// Records the line of the node about to be pushed and returns its path.
    fn child_path(&mut self, line: usize) -> Result<String, SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                line,
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
            });
        }
        let (path, line) = match self.stack.last() {
            None => (String::new(), line),
            Some(Frame::Seq { path, items, .. }) => (format!("{path}[{}]", items.len()), line),
            Some(Frame::Map {
                path,
                key: Some((k, key_line)),
                ..
            }) => (join(path, k), *key_line),
            Some(Frame::Map { key: None, .. }) => {
                return Err(SyntaxError {
                    line,
                    message: "mapping keys must be scalars".into(),
                });
            }
        };
        self.lines.0.entry(path.clone()).or_insert(line);
        Ok(path)
    }

    fn push_value(&mut self, value: Value, line: usize) {
        // Scalars record their line like containers do; a key-less position cannot occur here.
        let _ = self.child_path(line);
        self.attach(value);
    }

    fn attach(&mut self, value: Value) {
        match self.stack.last_mut() {
            None => {
                if !value.is_null() {
                    self.documents.push(Document {
                        value,
                        line: self.doc_line.max(1),
                        lines: std::mem::take(&mut self.lines),
                    });
                }
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => {
                if let Some((k, _)) = key.take() {
                    map.insert(k, value);
                }
            }
        }
    }
}

fn node_count(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(node_count).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(node_count).sum::<usize>(),
        _ => 1,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn scalar_key(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Resolves a plain scalar by the YAML 1.2 core schema (as Kubernetes' YAML reader does).
fn plain_scalar(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Some(n) = parse_int(text) {
        return Value::Number(n.into());
    }
    let looks_float = text
        .bytes()
        .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
        && text.bytes().any(|b| b.is_ascii_digit());
    if looks_float
        && let Ok(f) = text.parse::<f64>()
        && let Some(n) = Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(text.to_string())
}

fn parse_int(text: &str) -> Option<i64> {
    let (neg, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let value = if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()?
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        digits.parse().ok()?
    } else {
        return None;
    };
    Some(if neg { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_values_and_lines() {
        let text = "a: 1\nb:\n  - x: \"80\"\n    y: 80\n---\n---\nkind: Pod\n";
        let docs = parse_documents(text).unwrap();
        assert_eq!(docs.len(), 2, "empty middle document dropped");
        assert_eq!(docs[0].value["b"][0]["x"], Value::String("80".into()));
        assert_eq!(docs[0].value["b"][0]["y"], Value::Number(80.into()));
        assert_eq!(docs[0].lines.line_of("b[0].y"), Some(4));
        assert_eq!(
            docs[0].lines.line_of("b[0].nothere"),
            Some(3),
            "falls back to parent"
        );
        assert_eq!(docs[1].lines.line_of("kind"), Some(7));
    }

    #[test]
    fn json_is_yaml() {
        let docs = parse_documents("{\"kind\": \"Pod\", \"n\": [1, 2.5, null, true]}").unwrap();
        assert_eq!(docs[0].value["n"], serde_json::json!([1, 2.5, null, true]));
    }

    #[test]
    fn syntax_error_has_line() {
        let err = parse_documents("a: 1\nb: [1, 2\n").unwrap_err();
        assert!(err.line >= 2, "{err}");
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text += &format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            );
        }
        let err = parse_documents(&text).unwrap_err();
        assert!(err.message.contains("aliases"), "{err}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_documents(&text).is_err());
    }

    #[test]
    fn scalar_resolution() {
        for (text, want) in [
            ("80", serde_json::json!(80)),
            ("-3", serde_json::json!(-3)),
            ("1.5", serde_json::json!(1.5)),
            ("yes", serde_json::json!("yes")),
            ("10.0.0.0/8", serde_json::json!("10.0.0.0/8")),
            ("~", serde_json::json!(null)),
            ("True", serde_json::json!(true)),
        ] {
            assert_eq!(plain_scalar(text), want, "{text}");
        }
    }
}

/// Renders a JSON value as block-style YAML that [`parse_documents`] (and kubectl) read back
/// to the same value. Strings are quoted whenever a plain scalar could be read otherwise.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    emit(&mut out, value, 0, Context::Top);
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Top,
    MapValue,
    ListItem,
}

fn emit(out: &mut String, value: &Value, indent: usize, ctx: Context) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(m) if !m.is_empty() => {
            if ctx == Context::MapValue {
                out.push('\n');
            }
            for (i, (k, v)) in m.iter().enumerate() {
                if !(ctx == Context::ListItem && i == 0) {
                    out.push_str(&pad);
                }
                out.push_str(&scalar_text(k));
                out.push(':');
                emit(out, v, indent + 2, Context::MapValue);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            if ctx == Context::MapValue {
                out.push('\n');
            }
            for (i, v) in a.iter().enumerate() {
                if !(ctx == Context::ListItem && i == 0) {
                    out.push_str(&pad);
                }
                out.push_str("- ");
                emit(out, v, indent + 2, Context::ListItem);
            }
        }
        scalar => {
            if ctx == Context::MapValue {
                out.push(' ');
            }
            let text = match scalar {
                Value::Object(_) => "{}".to_string(),
                Value::Array(_) => "[]".to_string(),
                Value::String(s) => scalar_text(s),
                other => other.to_string(),
            };
            out.push_str(&text);
            out.push('\n');
        }
    }
}

/// A string as a plain scalar when that reads back as the same string, else double-quoted.
fn scalar_text(s: &str) -> String {
    let plain_ok = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
        && !s.starts_with(['-', '.'])
        && plain_scalar(s) == Value::String(s.to_string());
    if plain_ok {
        s.to_string()
    } else {
        Value::String(s.to_string()).to_string()
    }
}

#[cfg(test)]
mod emit_tests {
    use super::*;

    #[test]
    fn round_trip() {
        let v = serde_json::json!({
            "apiVersion": "networking.k8s.io/v1",
            "metadata": {"name": "x", "labels": {"a/b": "true", "n": "80", "e": ""}},
            "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}], "ports": [{"port": 80, "protocol": "TCP"}]}, {}],
                     "policyTypes": ["Ingress"], "weird": "a: b # c", "list": [[1, 2], []], "t": true, "z": null}
        });
        let text = to_yaml(&v);
        let back = parse_documents(&text).unwrap();
        assert_eq!(back[0].value, v, "{text}");
    }
}
