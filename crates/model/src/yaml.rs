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
    /// Line of every field and list item.
    pub lines: LineMap,
}

/// The line of every node of a document, in the document's shape; asked by field path
/// (`spec.ingress[0].from`). Built alongside the value, paths are only formed when asked.
#[derive(Debug, Clone, Default)]
pub struct LineMap(Option<Lines>);

#[derive(Debug, Clone)]
enum Lines {
    Leaf(usize),
    Seq(usize, Vec<Lines>),
    /// Entries: a hash of the key, the key's line, and the value's lines (hashes, not
    /// keys, keep building cheap; a collision could only misplace a line number).
    Map(usize, Vec<(u64, usize, Lines)>),
}

impl Lines {
    fn line(&self) -> usize {
        match self {
            Lines::Leaf(l) | Lines::Seq(l, _) | Lines::Map(l, _) => *l,
        }
    }
}

impl LineMap {
    /// The line of `path`, or of its nearest ancestor that has one.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut node = self.0.as_ref()?;
        let mut best = node.line();
        let mut rest = path;
        loop {
            rest = rest.strip_prefix('.').unwrap_or(rest);
            if rest.is_empty() {
                return Some(best);
            }
            match node {
                Lines::Seq(_, items) if rest.starts_with('[') => {
                    let close = rest.find(']')?;
                    let Some(item) = rest[1..close]
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| items.get(i))
                    else {
                        return Some(best);
                    };
                    node = item;
                    best = node.line();
                    rest = &rest[close + 1..];
                }
                Lines::Map(_, entries) => {
                    // Keys may contain dots (label keys): try the longest prefix first.
                    let ends = rest
                        .match_indices(['.', '['])
                        .map(|(i, _)| i)
                        .chain([rest.len()]);
                    let mut found = None;
                    for end in ends.collect::<Vec<_>>().into_iter().rev() {
                        let h = key_hash(&rest[..end]);
                        if let Some((_, key_line, child)) = entries.iter().find(|(k, _, _)| *k == h)
                        {
                            found = Some((end, *key_line, child));
                            break;
                        }
                    }
                    let Some((end, key_line, child)) = found else {
                        return Some(best);
                    };
                    best = key_line;
                    node = child;
                    rest = &rest[end..];
                }
                _ => return Some(best),
            }
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
/// Large texts are split at document markers and parsed in parallel.
pub fn parse_documents(text: &str) -> Result<Vec<Document>, SyntaxError> {
    const CHUNK: usize = 256 * 1024;
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    if text.len() < CHUNK || threads < 2 {
        return parse_chunk(text, 0);
    }
    // A line that starts with `---` begins a document wherever it appears, so the text
    // can be cut there: each piece is whole documents.
    let want = threads.max(text.len() / CHUNK);
    let mut cuts = vec![0];
    for k in 1..want {
        let from = (text.len() * k / want).max(*cuts.last().unwrap_or(&0));
        if let Some(pos) = next_document_marker(text, from)
            && pos > *cuts.last().unwrap_or(&0)
        {
            cuts.push(pos);
        }
    }
    cuts.push(text.len());
    let pieces: Vec<(&str, usize)> = cuts
        .windows(2)
        .map(|w| {
            (
                &text[w[0]..w[1]],
                text[..w[0]].bytes().filter(|b| *b == b'\n').count(),
            )
        })
        .collect();
    let results: Vec<Result<Vec<Document>, SyntaxError>> = std::thread::scope(|s| {
        let handles: Vec<_> = pieces
            .iter()
            .map(|&(piece, offset)| s.spawn(move || parse_chunk(piece, offset)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(SyntaxError {
                        line: 0,
                        message: "parser thread failed".into(),
                    })
                })
            })
            .collect()
    });
    let mut docs = Vec::new();
    for r in results {
        docs.extend(r?);
    }
    Ok(docs)
}

/// The offset of the first line at or after `from` that is a document marker (`---`
/// followed by a space, a tab or the end of the line).
fn next_document_marker(text: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(p) = text[at..].find("\n---") {
        let start = at + p + 1;
        match text.as_bytes().get(start + 3) {
            None | Some(b' ' | b'\t' | b'\r' | b'\n') => return Some(start),
            _ => at = start,
        }
    }
    None
}

/// Parses a piece of text whose first line is line `offset + 1` of the file.
fn parse_chunk(text: &str, offset: usize) -> Result<Vec<Document>, SyntaxError> {
    let mut builder = Builder {
        offset,
        ..Builder::default()
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| SyntaxError {
            line: e.marker().line() + offset,
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
    anchors: HashMap<usize, (Value, Lines)>,
    /// Nodes in the current document, aliases counted at their expanded size.
    nodes: usize,
    doc_line: usize,
    /// Lines before the parsed text (when a file is parsed in pieces).
    offset: usize,
}

enum Frame {
    Seq {
        line: usize,
        items: Vec<Value>,
        lines: Vec<Lines>,
        anchor: usize,
    },
    Map {
        line: usize,
        map: Map<String, Value>,
        lines: Vec<(u64, usize, Lines)>,
        key: Option<(String, usize)>,
        anchor: usize,
    },
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), SyntaxError> {
        let line = span.start.line() + self.offset;
        match event {
            Event::DocumentStart(_) => {
                self.anchors.clear();
                self.nodes = 0;
                self.doc_line = line;
            }
            Event::Scalar(text, style, anchor, tag) => {
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = self.stack.last_mut()
                {
                    *key = Some((text.into_owned(), line));
                    return Ok(());
                }
                let forced_string = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let value = if style == ScalarStyle::Plain && !forced_string {
                    plain_scalar(&text)
                } else {
                    Value::String(text.into_owned())
                };
                if anchor > 0 {
                    self.anchors
                        .insert(anchor, (value.clone(), Lines::Leaf(line)));
                }
                self.attach(value, Lines::Leaf(line), line)?;
            }
            Event::Alias(id) => {
                let (value, lines) = self.anchors.get(&id).cloned().ok_or(SyntaxError {
                    line,
                    message: format!("unknown alias {id}"),
                })?;
                self.nodes += node_count(&value);
                if self.nodes > MAX_NODES {
                    return Err(SyntaxError {
                        line,
                        message: format!("more than {MAX_NODES} nodes once aliases are expanded"),
                    });
                }
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = self.stack.last_mut()
                {
                    *key = Some((scalar_key(&value), line));
                    return Ok(());
                }
                self.attach(value, lines, line)?;
            }
            Event::SequenceStart(anchor, _) => {
                self.check_depth(line)?;
                self.stack.push(Frame::Seq {
                    line,
                    items: Vec::new(),
                    lines: Vec::new(),
                    anchor,
                });
            }
            Event::MappingStart(anchor, _) => {
                self.check_depth(line)?;
                self.stack.push(Frame::Map {
                    line,
                    map: Map::new(),
                    lines: Vec::new(),
                    key: None,
                    anchor,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, lines, anchor, start) = match self.stack.pop() {
                    Some(Frame::Seq {
                        line,
                        items,
                        lines,
                        anchor,
                    }) => (Value::Array(items), Lines::Seq(line, lines), anchor, line),
                    Some(Frame::Map {
                        line,
                        map,
                        lines,
                        anchor,
                        ..
                    }) => (Value::Object(map), Lines::Map(line, lines), anchor, line),
                    None => return Ok(()),
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, (value.clone(), lines.clone()));
                }
                self.attach(value, lines, start)?;
            }
            Event::DocumentEnd | Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn check_depth(&self, line: usize) -> Result<(), SyntaxError> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(SyntaxError {
                line,
                message: format!("nesting deeper than {MAX_DEPTH} levels"),
            });
        }
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(SyntaxError {
                line,
                message: "mapping keys must be scalars".into(),
            });
        }
        Ok(())
    }

    /// Adds a finished node to its parent (or finishes the document).
    fn attach(&mut self, value: Value, lines: Lines, line: usize) -> Result<(), SyntaxError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                line,
                message: format!("more than {MAX_NODES} nodes"),
            });
        }
        match self.stack.last_mut() {
            None => {
                if !value.is_null() {
                    self.documents.push(Document {
                        value,
                        line: self.doc_line.max(1),
                        lines: LineMap(Some(lines)),
                    });
                }
            }
            Some(Frame::Seq {
                items, lines: l, ..
            }) => {
                items.push(value);
                l.push(lines);
            }
            Some(Frame::Map {
                map, lines: l, key, ..
            }) => {
                if let Some((k, key_line)) = key.take() {
                    l.push((key_hash(&k), key_line, lines));
                    map.insert(k, value);
                }
            }
        }
        Ok(())
    }
}

/// FNV-1a of a mapping key.
fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn node_count(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(node_count).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(node_count).sum::<usize>(),
        _ => 1,
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
    fn large_texts_parse_in_pieces_with_the_right_lines() {
        let doc =
            |i: usize| format!("---\nkind: Pod\nmetadata:\n  name: p{i}\n  labels: {{a: b}}\n");
        let text: String = (0..20_000).map(doc).collect();
        assert!(text.len() > 512 * 1024);
        let docs = parse_documents(&text).unwrap();
        assert_eq!(docs.len(), 20_000);
        for (i, d) in docs.iter().enumerate().step_by(997) {
            assert_eq!(d.value["metadata"]["name"], format!("p{i}"));
            assert_eq!(
                d.lines.line_of("metadata.name"),
                Some(5 * i + 4),
                "document {i}"
            );
        }
        let bad = format!("{text}---\nx: [1,\n");
        assert_eq!(parse_documents(&bad).unwrap_err().line, 100_003);
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
