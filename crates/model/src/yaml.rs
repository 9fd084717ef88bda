//! YAML (and JSON, its subset) documents into JSON values plus a map from field path to line.
//!
//! kubectl converts YAML manifests to JSON before sending them (`sigs.k8s.io/yaml` over
//! go-yaml v2, which reads YAML 1.1 scalars: `010` is 8, `yes` is true); we do the same
//! (the rules are in `yaml/scalar.rs`), and remember where every field came from so that every later error can name its line. Duplicate mapping keys are
//! refused, and alias expansion is bounded by an [`AliasBudget`].
//!
//! The block-style documents that Kubernetes tools write are read by a fast reader
//! (`yaml/block.rs`); from the first document outside that subset on, saphyr-parser reads
//! the text, so what a document means, and every error, is always the parser's.

mod block;
mod scalar;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use saphyr_parser::{Event, Parser, ScalarStyle, Tag};
use serde_json::{Map, Value};

use scalar::Resolved;

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
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LineMap(Option<Lines>);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
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

    /// Whether this node, its keys and everything under it are on `line`.
    fn all_on(&self, line: usize) -> bool {
        match self {
            Lines::Leaf(l) => *l == line,
            Lines::Seq(l, items) => *l == line && items.iter().all(|i| i.all_on(line)),
            Lines::Map(l, entries) => {
                *l == line && entries.iter().all(|(_, k, c)| *k == line && c.all_on(line))
            }
        }
    }

    /// The node at `path`, written `key`, `key[i]` and `[i]` steps joined by dots (the
    /// paths of a List's items: `items[2]`); keys here hold no dots or brackets.
    fn at(&self, path: &str) -> Option<&Lines> {
        let mut node = self;
        for step in path.split('.').filter(|s| !s.is_empty()) {
            let (key, indexes) = step.split_at(step.find('[').unwrap_or(step.len()));
            if !key.is_empty() {
                let Lines::Map(_, entries) = node else {
                    return None;
                };
                let h = key_hash(key);
                node = entries
                    .iter()
                    .find(|(k, _, _)| *k == h)
                    .map(|(_, _, c)| c)?;
            }
            for index in indexes.split_terminator(']') {
                let i: usize = index.strip_prefix('[')?.parse().ok()?;
                let Lines::Seq(_, items) = node else {
                    return None;
                };
                node = items.get(i)?;
            }
        }
        Some(node)
    }
}

impl LineMap {
    /// The lines of the node at `path` (`""`, or a List item's `items[2]`), as a map of
    /// their own; empty when every one of them is on `line` (a one-line JSON object, as the
    /// Kubernetes API sends them), since the object's line then says as much.
    pub fn subtree(&self, path: &str, line: usize) -> LineMap {
        let node = self.0.as_ref().and_then(|n| n.at(path));
        LineMap(node.filter(|n| !n.all_on(line)).cloned())
    }

    /// A map of only the given fields (dotted keys, `metadata.name`) at their lines, under
    /// a root on `line`.
    pub fn of_fields(line: usize, fields: &[(&str, usize)]) -> LineMap {
        let mut root = Lines::Map(line, Vec::new());
        for (path, at) in fields {
            let mut node = &mut root;
            let mut steps = path.split('.').peekable();
            while let Some(key) = steps.next() {
                let Lines::Map(_, entries) = node else { break };
                let h = key_hash(key);
                let i = match entries.iter().position(|(k, _, _)| *k == h) {
                    Some(i) => i,
                    None => {
                        let child = if steps.peek().is_some() {
                            Lines::Map(*at, Vec::new())
                        } else {
                            Lines::Leaf(*at)
                        };
                        entries.push((h, *at, child));
                        entries.len() - 1
                    }
                };
                node = &mut entries[i].2;
            }
        }
        LineMap(Some(root))
    }

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

/// Every document of a text that could be read (or what a caller made of each, see
/// [`map_stream`]), and the syntax error of each one that could not (reading resumes at
/// the next `---` line after a broken document).
#[derive(Debug)]
pub struct Parsed<T = Document> {
    /// The documents that parsed, in order.
    pub documents: Vec<T>,
    /// One error per broken document, in order.
    pub errors: Vec<SyntaxError>,
}

impl<T> Default for Parsed<T> {
    fn default() -> Self {
        Parsed {
            documents: Vec::new(),
            errors: Vec::new(),
        }
    }
}

/// Bytes that alias expansion may add, shared by all the texts of one load: every alias
/// costs the size of what it copies (text bytes plus [`NODE_COST`] per node).
pub const MAX_ALIAS_BYTES: usize = 64 << 20;

/// What one node counts for in the alias budget (about what it costs in memory).
pub const NODE_COST: usize = 64;

/// Deeper documents are refused (no Kubernetes object is nearly this deep).
pub const MAX_DEPTH: usize = 128;

/// What alias expansion may still add, in bytes; one budget is shared by all the texts of
/// a load (a "billion laughs" document, or many of them, must not exhaust memory).
#[derive(Debug)]
pub struct AliasBudget(AtomicUsize);

impl AliasBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Self {
        AliasBudget(AtomicUsize::new(bytes))
    }

    /// Takes `n` bytes; false (taking nothing) when fewer are left.
    fn take(&self, n: usize) -> bool {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }
}

impl Default for AliasBudget {
    fn default() -> Self {
        AliasBudget::new(MAX_ALIAS_BYTES)
    }
}

/// Parses every document of `text`, failing on the first syntax error. Empty documents
/// (`---` with nothing after) are dropped.
pub fn parse_documents(text: &str) -> Result<Vec<Document>, SyntaxError> {
    let parsed = parse_stream(text, &AliasBudget::default());
    match parsed.errors.into_iter().next() {
        Some(e) => Err(e),
        None => Ok(parsed.documents),
    }
}

/// Parses every document of `text`, keeping the documents that parse and an error for each
/// one that does not. Large texts are split at document markers and parsed in parallel.
pub fn parse_stream(text: &str, budget: &AliasBudget) -> Parsed {
    map_stream(text, budget, &|document| document)
}

/// Parses every document of `text` as [`parse_stream`] does, handing each to `f` as soon as
/// it is complete and keeping only what `f` makes of it: a caller that needs a document
/// only briefly never holds them all at once.
pub fn map_stream<T: Send>(
    text: &str,
    budget: &AliasBudget,
    f: &(dyn Fn(Document) -> T + Sync),
) -> Parsed<T> {
    map_texts(&[text], budget, &|_, document| f(document))
        .pop()
        .unwrap_or_default()
}

/// [`map_stream`] for several texts at once, on every core: `f` is told which text
/// (its index in `texts`) each document is from; the result has one entry per text.
///
/// Texts are cut at document markers into pieces of about 256 KiB, and each core parses
/// one run of consecutive pieces of about equal size, so that a single large file and a
/// directory of small ones spread alike, and each thread reuses its own memory.
pub fn map_texts<T: Send>(
    texts: &[&str],
    budget: &AliasBudget,
    f: &(dyn Fn(usize, Document) -> T + Sync),
) -> Vec<Parsed<T>> {
    const PIECE: usize = 256 * 1024;
    /// A piece: the text it is from, its text, and the lines before it in that text.
    type Piece<'t> = (usize, &'t str, usize);
    let mut pieces: Vec<Piece<'_>> = Vec::new();
    for (index, text) in texts.iter().enumerate() {
        // A line that starts with `---` begins a document wherever it appears, so the
        // text can be cut there: each piece is whole documents.
        let (mut from, mut lines) = (0, 0);
        while from < text.len() {
            let to = next_document_marker(text, from + PIECE).unwrap_or(text.len());
            pieces.push((index, &text[from..to], lines));
            lines += text[from..to].bytes().filter(|b| *b == b'\n').count();
            from = to;
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    let total: usize = pieces.iter().map(|p| p.1.len()).sum();
    // Thread k takes the pieces that start in the k-th equal share of all the bytes.
    let mut runs: Vec<&[Piece<'_>]> = Vec::new();
    let (mut first, mut seen) = (0, 0);
    for (i, piece) in pieces.iter().enumerate() {
        if seen >= total * (runs.len() + 1) / threads && i > first {
            runs.push(&pieces[first..i]);
            first = i;
        }
        seen += piece.1.len();
    }
    runs.push(&pieces[first..]);
    let parse = |run: &[Piece<'_>]| -> Vec<Parsed<T>> {
        run.iter()
            .map(|&(index, piece, lines)| {
                parse_chunk(piece, lines, budget, &|document| f(index, document), true)
            })
            .collect()
    };
    let parsed: Vec<Parsed<T>> = if runs.len() < 2 {
        parse(&pieces)
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = runs
                .iter()
                .map(|&run| (run, s.spawn(move || parse(run))))
                .collect();
            handles
                .into_iter()
                .flat_map(|(run, h)| {
                    h.join().unwrap_or_else(|_| {
                        run.iter()
                            .map(|&(_, _, lines)| Parsed {
                                documents: Vec::new(),
                                errors: vec![SyntaxError {
                                    line: lines + 1,
                                    message: "parser thread failed".into(),
                                }],
                            })
                            .collect()
                    })
                })
                .collect()
        })
    };
    let mut out: Vec<Parsed<T>> = texts.iter().map(|_| Parsed::default()).collect();
    for (&(index, _, _), mut p) in pieces.iter().zip(parsed) {
        out[index].documents.append(&mut p.documents);
        out[index].errors.append(&mut p.errors);
    }
    out
}

/// The offset of the first line at or after `from` that is a document marker (`---`
/// followed by a space, a tab or the end of the line).
fn next_document_marker(text: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    if at >= text.len() {
        return None;
    }
    while let Some(p) = text[at..].find("\n---") {
        let start = at + p + 1;
        match text.as_bytes().get(start + 3) {
            None | Some(b' ' | b'\t' | b'\r' | b'\n') => return Some(start),
            _ => at = start,
        }
    }
    None
}

/// Parses a piece of text whose first line is line `offset + 1` of the file; after a
/// broken document, parsing starts again at the next document marker. With `block`, the
/// documents of the block subset are read by the fast reader (`yaml/block.rs`).
fn parse_chunk<T>(
    text: &str,
    offset: usize,
    budget: &AliasBudget,
    f: &dyn Fn(Document) -> T,
    block: bool,
) -> Parsed<T> {
    let mut parsed = Parsed::default();
    let (mut rest, mut offset) = (text, offset);
    loop {
        let mut emit = |document| parsed.documents.push(f(document));
        let failure = Builder::new(offset, budget, &mut emit, block).run(rest);
        let Some((error, broken_from)) = failure else {
            return parsed;
        };
        parsed.errors.push(error);
        // Resume after the line the broken document started on (local, 1-based).
        let line_start = match broken_from {
            0 | 1 => 0,
            n => rest
                .match_indices('\n')
                .nth(n - 2)
                .map_or(rest.len(), |(i, _)| i + 1),
        };
        let Some(next) = next_document_marker(rest, line_start.min(rest.len())) else {
            return parsed;
        };
        offset += rest[..next].bytes().filter(|b| *b == b'\n').count();
        rest = &rest[next..];
    }
}

struct Builder<'b> {
    /// Where each complete document goes.
    emit: &'b mut dyn FnMut(Document),
    /// The current document, once its root node is complete (kept at its end).
    pending: Option<Document>,
    stack: Vec<Frame>,
    /// Anchored nodes, with their cost in the alias budget.
    anchors: HashMap<usize, (Value, Lines, usize)>,
    budget: &'b AliasBudget,
    doc_line: usize,
    /// Line (local to the parsed text) where the current document started.
    doc_start: Option<usize>,
    /// Lines before the parsed text (when a file is parsed in pieces).
    offset: usize,
    /// Whether the fast reader reads what it can (else the full parser reads everything).
    block: bool,
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
        /// The pending key is a merge key (a plain `<<`).
        merge: bool,
        anchor: usize,
    },
}

impl<'b> Builder<'b> {
    fn new(
        offset: usize,
        budget: &'b AliasBudget,
        emit: &'b mut dyn FnMut(Document),
        block: bool,
    ) -> Self {
        Builder {
            block,
            emit,
            pending: None,
            stack: Vec::new(),
            anchors: HashMap::new(),
            budget,
            doc_line: 0,
            doc_start: None,
            offset,
        }
    }

    /// Builds the documents of `text`; on an error, the error and the local line the broken
    /// document started on. Documents of the block subset are read by the fast reader, the
    /// rest (from the first document it does not read) by the full parser.
    fn run(&mut self, text: &str) -> Option<(SyntaxError, usize)> {
        if !self.block {
            return self.run_full(text, 0);
        }
        let mut reader = block::Reader::new(text);
        let mut events = Vec::new();
        while let Some(next) = reader.next_document(&mut events) {
            match next {
                block::Next::Document => {
                    for (event, line) in events.drain(..) {
                        if let Err(e) = self.event(event, line) {
                            return Some(self.broken(e));
                        }
                    }
                }
                block::Next::GaveUp { offset, line } => {
                    return self.run_full(&text[offset..], line - 1);
                }
            }
        }
        self.emit_pending();
        None
    }

    /// [`Builder::run`] with the full parser, for the part of the text after its first
    /// `before` lines.
    fn run_full(&mut self, text: &str, before: usize) -> Option<(SyntaxError, usize)> {
        for event in Parser::new_from_str(text) {
            let result = event
                .map_err(|e| SyntaxError {
                    line: e.marker().line() + before + self.offset,
                    message: e.info().to_string(),
                })
                .and_then(|(event, span)| self.event(event, span.start.line() + before));
            if let Err(e) = result {
                return Some(self.broken(e));
            }
        }
        self.emit_pending();
        None
    }

    /// An error, naming the line its document started on, and that (local) line.
    fn broken(&self, mut e: SyntaxError) -> (SyntaxError, usize) {
        let from = self.doc_start.unwrap_or(e.line - self.offset);
        if from + self.offset != e.line {
            e.message = format!(
                "{} (in the document starting at line {})",
                e.message,
                from + self.offset
            );
        }
        (e, from)
    }

    /// Takes one event, starting on line `local` of the text.
    fn event(&mut self, event: Event<'_>, local: usize) -> Result<(), SyntaxError> {
        let line = local + self.offset;
        match event {
            Event::DocumentStart(_) => {
                self.anchors.clear();
                self.doc_line = line;
                self.doc_start = Some(local);
            }
            Event::DocumentEnd => {
                self.emit_pending();
                self.doc_start = None;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let resolved = resolve(&text, style, tag.as_deref())
                    .map_err(|message| SyntaxError { line, message })?;
                if let Some(Frame::Map {
                    key: key @ None,
                    merge,
                    ..
                }) = self.stack.last_mut()
                {
                    *merge = style == ScalarStyle::Plain && tag.is_none() && text == "<<";
                    let name = match resolved {
                        Resolved::Str => text.into_owned(),
                        r => r
                            .into_key(&text)
                            .map_err(|message| SyntaxError { line, message })?,
                    };
                    *key = Some((name, line));
                    return Ok(());
                }
                let value = match resolved {
                    Resolved::Str => Value::String(text.into_owned()),
                    r => r
                        .into_value(&text)
                        .map_err(|message| SyntaxError { line, message })?,
                };
                if anchor > 0 {
                    let cost = cost(&value);
                    self.anchors
                        .insert(anchor, (value.clone(), Lines::Leaf(line), cost));
                }
                self.attach(value, Lines::Leaf(line))?;
            }
            Event::Alias(id) => {
                let (value, lines, cost) = self.anchors.get(&id).cloned().ok_or(SyntaxError {
                    line,
                    message: format!("unknown alias {id}"),
                })?;
                if !self.budget.take(cost) {
                    return Err(SyntaxError {
                        line,
                        message: format!(
                            "aliases expand to more than {} MiB (the limit of one load)",
                            MAX_ALIAS_BYTES >> 20
                        ),
                    });
                }
                if let Some(Frame::Map {
                    key: key @ None, ..
                }) = self.stack.last_mut()
                {
                    *key = Some((scalar_key(&value), line));
                    return Ok(());
                }
                self.attach(value, lines)?;
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
                    merge: false,
                    anchor,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, lines, anchor) = match self.stack.pop() {
                    Some(Frame::Seq {
                        line,
                        items,
                        lines,
                        anchor,
                    }) => (Value::Array(items), Lines::Seq(line, lines), anchor),
                    Some(Frame::Map {
                        line,
                        map,
                        lines,
                        anchor,
                        ..
                    }) => (Value::Object(map), Lines::Map(line, lines), anchor),
                    None => return Ok(()),
                };
                if anchor > 0 {
                    let cost = cost(&value);
                    self.anchors
                        .insert(anchor, (value.clone(), lines.clone(), cost));
                }
                self.attach(value, lines)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::Nothing => {}
        }
        Ok(())
    }

    /// Hands on the current document, if it is complete.
    fn emit_pending(&mut self) {
        if let Some(document) = self.pending.take() {
            (self.emit)(document);
        }
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

    /// Adds a finished node to its parent (or completes the document). A key given twice
    /// in one mapping is an error naming both lines, as kubectl refuses it.
    fn attach(&mut self, value: Value, lines: Lines) -> Result<(), SyntaxError> {
        match self.stack.last_mut() {
            None => {
                self.pending = (!value.is_null()).then(|| Document {
                    value,
                    line: self.doc_line.max(1),
                    lines: LineMap(Some(lines)),
                });
            }
            Some(Frame::Seq {
                items, lines: l, ..
            }) => {
                items.push(value);
                l.push(lines);
            }
            Some(Frame::Map {
                map,
                lines: l,
                key,
                merge,
                ..
            }) => {
                if let Some((k, key_line)) = key.take() {
                    if std::mem::take(merge) {
                        return merge_into(map, l, value, lines, key_line);
                    }
                    insert_entry(map, l, k, value, key_line, lines)?;
                }
            }
        }
        Ok(())
    }
}

/// Adds `key: value` to a mapping being built; a key it already has is an error naming
/// both lines, as kubectl refuses it.
fn insert_entry(
    map: &mut Map<String, Value>,
    entries: &mut Vec<(u64, usize, Lines)>,
    key: String,
    value: Value,
    key_line: usize,
    lines: Lines,
) -> Result<(), SyntaxError> {
    let hash = key_hash(&key);
    match map.entry(key) {
        serde_json::map::Entry::Occupied(e) => {
            let first = entries
                .iter()
                .find(|(h, _, _)| *h == hash)
                .map_or(key_line, |(_, first, _)| *first);
            Err(SyntaxError {
                line: key_line,
                message: format!(
                    "duplicate mapping key {:?}: first at line {first}, again at line {key_line}",
                    e.key()
                ),
            })
        }
        serde_json::map::Entry::Vacant(e) => {
            e.insert(value);
            entries.push((hash, key_line, lines));
            Ok(())
        }
    }
}

/// A merge key (`<<: *defaults`, or a sequence of mappings) adds the merged mappings'
/// keys, as go-yaml v2 does; a key both merged and written (or merged twice) is a
/// duplicate, as in kubectl's strict reading.
fn merge_into(
    map: &mut Map<String, Value>,
    entries: &mut Vec<(u64, usize, Lines)>,
    value: Value,
    lines: Lines,
    line: usize,
) -> Result<(), SyntaxError> {
    let not_a_map = || SyntaxError {
        line,
        message: "map merge requires a mapping or a sequence of mappings as the value".into(),
    };
    let merged: Vec<(Map<String, Value>, Lines)> = match (value, lines) {
        (Value::Object(m), lines) => vec![(m, lines)],
        (Value::Array(items), Lines::Seq(_, item_lines)) => {
            // Earlier mappings take precedence: go-yaml v2 merges them last.
            let mut out = Vec::new();
            for (item, lines) in items.into_iter().zip(item_lines).rev() {
                match item {
                    Value::Object(m) => out.push((m, lines)),
                    _ => return Err(not_a_map()),
                }
            }
            out
        }
        _ => return Err(not_a_map()),
    };
    for (m, lines) in merged {
        let mut from: HashMap<u64, (usize, Lines)> = match lines {
            Lines::Map(_, e) => e.into_iter().map(|(h, l, c)| (h, (l, c))).collect(),
            _ => HashMap::new(),
        };
        for (k, v) in m {
            let (key_line, child) = from
                .remove(&key_hash(&k))
                .unwrap_or((line, Lines::Leaf(line)));
            insert_entry(map, entries, k, v, key_line.max(line), child)?;
        }
    }
    Ok(())
}

/// How a scalar reads: plain untagged scalars by kubectl's YAML 1.1 rules, tagged ones by
/// their core-schema tag, quoted ones as strings.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Resolved, String> {
    match tag.and_then(core_tag) {
        Some(t) => scalar::resolve_tagged(t, text),
        None if tag.is_some() => Ok(Resolved::Str),
        None if style == ScalarStyle::Plain => Ok(scalar::resolve_plain(text)),
        None => Ok(Resolved::Str),
    }
}

/// The name of a core-schema tag (`!!int`, `!<tag:yaml.org,2002:int>`).
fn core_tag(tag: &Tag) -> Option<&str> {
    const CORE: &str = "tag:yaml.org,2002:";
    if tag.handle == CORE || tag.handle == "!!" {
        Some(&tag.suffix)
    } else if tag.handle.is_empty() {
        tag.suffix.strip_prefix(CORE)
    } else {
        None
    }
}

/// FNV-1a of a mapping key.
fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What a copy of `v` costs in the alias budget.
fn cost(v: &Value) -> usize {
    NODE_COST
        + match v {
            Value::Array(a) => a.iter().map(cost).sum::<usize>(),
            Value::Object(m) => m.iter().map(|(k, v)| k.len() + cost(v)).sum::<usize>(),
            Value::String(s) => s.len(),
            _ => 0,
        }
}

fn scalar_key(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The JSON value kubectl sends for a plain, untagged scalar (YAML 1.1 as go-yaml v2 reads
/// it: `0120` is 80, `yes` is true). `.inf` and `.nan`, which kubectl refuses because
/// JSON cannot carry them, are `null` here; the loader refuses them.
pub fn plain_scalar(text: &str) -> Value {
    scalar::resolve_plain(text)
        .into_value(text)
        .unwrap_or(Value::Null)
}

/// One reading of a text as comparable text: each document (its value, line and the lines
/// of every node) and each error (line, message).
#[doc(hidden)]
pub type Reading = (Vec<String>, Vec<(usize, String)>);

/// The readings of `text` with the fast reader (from which the full parser takes over
/// where the text leaves the subset) and with the full parser alone: equal for every text.
/// Public for the fuzz target that checks it.
#[doc(hidden)]
pub fn readings(text: &str) -> [Reading; 2] {
    [true, false].map(|block| {
        let parsed = parse_chunk(
            text,
            0,
            &AliasBudget::default(),
            &|d| format!("{:?} {} {:?}", d.value, d.line, d.lines),
            block,
        );
        let errors = parsed.errors.into_iter().map(|e| (e.line, e.message));
        (parsed.documents, errors.collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_values_and_lines() {
        let text = "a: 1\nb:\n  - x: \"80\"\n    p: 80\n---\n---\nkind: Pod\n";
        let docs = parse_documents(text).unwrap();
        assert_eq!(docs.len(), 2, "empty middle document dropped");
        assert_eq!(docs[0].value["b"][0]["x"], Value::String("80".into()));
        assert_eq!(docs[0].value["b"][0]["p"], Value::Number(80.into()));
        assert_eq!(docs[0].lines.line_of("b[0].p"), Some(4));
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

    /// Regression: the budget counts bytes, not nodes (a 100 KB string aliased 10⁴
    /// times used 2.5 GB), and is shared by the documents and texts of one load.
    #[test]
    fn bug7_alias_expansion_is_bounded_in_bytes() {
        let big = "x".repeat(100_000);
        let aliases = "  - *s\n".repeat(10_000);
        let text = format!("s: &s {big}\nl:\n{aliases}");
        let err = parse_documents(&text).unwrap_err();
        assert!(err.message.contains("64 MiB"), "{err}");
        assert!(err.line > 2, "the line of the alias that went over: {err}");

        // 400 aliases of 100 KB (40 MB) pass alone, but not twice from one budget.
        let fits = format!("s: &s {big}\nl:\n{}", "  - *s\n".repeat(400));
        let budget = AliasBudget::default();
        assert!(parse_stream(&fits, &budget).errors.is_empty());
        assert_eq!(parse_stream(&fits, &budget).errors.len(), 1);
    }

    /// Regression: kubectl refuses a mapping key given twice; so do we, naming both.
    #[test]
    fn bug8_duplicate_mapping_keys_are_refused_with_both_lines() {
        let err = parse_documents("kind: Pod\nmetadata:\n  name: a\n  name: b\n").unwrap_err();
        assert_eq!(err.line, 4);
        assert!(
            err.message.contains("\"name\"") && err.message.contains("first at line 3"),
            "{err}"
        );
        // Keys are compared as kubectl sends them: `yes` and `true` are both "true".
        let err = parse_documents("{yes: 1, \"true\": 2}").unwrap_err();
        assert!(err.message.contains("\"true\""), "{err}");
        // The same key in different mappings is fine.
        assert!(parse_documents("a: {x: 1}\nb: {x: 1}\n").is_ok());
    }

    #[test]
    fn merge_keys_merge_as_in_go_yaml_v2() {
        let text = "base: &b {app: web, tier: db}\nsel:\n  <<: *b\n  extra: x\nboth:\n  <<: [{a: 1}, {b: 2}]\n";
        let docs = parse_documents(text).unwrap();
        assert_eq!(
            docs[0].value["sel"],
            serde_json::json!({"app": "web", "tier": "db", "extra": "x"})
        );
        assert_eq!(docs[0].value["both"], serde_json::json!({"a": 1, "b": 2}));
        let err = parse_documents("b: &b {app: web}\ns:\n  <<: *b\n  app: db\n").unwrap_err();
        assert!(
            err.message.contains("duplicate mapping key \"app\""),
            "{err}"
        );
        assert!(parse_documents("s:\n  <<: 1\n").is_err());
        assert_eq!(
            parse_documents("s: {\"<<\": 1}\n").unwrap()[0].value["s"]["<<"],
            1,
            "a quoted << is an ordinary key"
        );
    }

    /// Regression: a broken document loses only itself.
    #[test]
    fn bug5_a_broken_document_loses_only_itself() {
        let text = "a: 1\n---\nb: [unclosed\n---\nc: 3\n---\nd: {x: 1, x: 2}\n---\ne: 5\n";
        let parsed = parse_stream(text, &AliasBudget::default());
        let keys: Vec<String> = parsed
            .documents
            .iter()
            .flat_map(|d| {
                d.value
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.keys().cloned())
            })
            .collect();
        assert_eq!(keys, ["a", "c", "e"]);
        assert_eq!(parsed.documents[1].line, 4, "lines stay those of the file");
        let lines: Vec<usize> = parsed.errors.iter().map(|e| e.line).collect();
        assert_eq!(lines.len(), 2, "{:?}", parsed.errors);
        assert!((3..=4).contains(&lines[0]), "{:?}", parsed.errors);
        assert_eq!(lines[1], 7, "{:?}", parsed.errors);
        // A broken first document without a marker, and a broken last one.
        let parsed = parse_stream("u: ]\n---\nv: 1\n---\nw: [\n", &AliasBudget::default());
        assert_eq!(parsed.documents.len(), 1);
        assert_eq!(parsed.documents[0].value["v"], 1);
        assert_eq!(parsed.errors.len(), 2, "{:?}", parsed.errors);
    }

    /// Regression: plain scalars are read as kubectl reads them (YAML 1.1).
    #[test]
    fn bug2_plain_scalars_are_yaml_1_1_and_quoted_ones_strings() {
        let docs = parse_documents(
            "priority: 010\nport: 0120\nq: \"0120\"\ns: '010'\nb: yes\nt: !!int \"0120\"\nu: !!str 010\nk: {010: a, on: b}\nf: 80.0\n",
        )
        .unwrap();
        let v = &docs[0].value;
        assert_eq!(v["priority"], 8);
        assert_eq!(v["port"], 80);
        assert_eq!(v["q"], "0120");
        assert_eq!(v["s"], "010");
        assert_eq!(v["b"], true);
        assert_eq!(v["t"], 80);
        assert_eq!(v["u"], "010");
        assert_eq!(v["k"], serde_json::json!({"8": "a", "true": "b"}));
        assert_eq!(v["f"], 80);
        let err = parse_documents("a: 1\nb: .inf\n").unwrap_err();
        assert_eq!(err.line, 2, "{err}");
        assert!(parse_documents("a: !!int abc\n").is_err());
        assert!(parse_documents("~: x\n").is_err(), "a null key");
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
        let parsed = parse_stream(&bad, &AliasBudget::default());
        assert_eq!(parsed.documents.len(), 20_000);
    }

    #[test]
    fn several_texts_parse_together_each_keeping_its_documents_errors_and_lines() {
        // Multi-byte text everywhere, so that no cut can fall inside a character.
        let doc = |i: usize| format!("---\nkind: Pod\nmetadata:\n  name: p{i}\n  note: ünïcödé\n");
        let big: String = (0..30_000).map(doc).collect();
        let broken = format!("{}---\nx: [1,\n{}", doc(0), doc(1));
        let small = doc(7);
        let texts = [
            big.as_str(),
            broken.as_str(),
            "",
            small.as_str(),
            big.as_str(),
        ];
        let parsed = map_texts(&texts, &AliasBudget::default(), &|i, d| {
            (i, d.value["metadata"]["name"].clone(), d.line)
        });
        assert_eq!(parsed.len(), texts.len());
        for (i, p) in parsed.iter().enumerate() {
            let alone = parse_stream(texts[i], &AliasBudget::default());
            let want: Vec<_> = alone
                .documents
                .iter()
                .map(|d| (i, d.value["metadata"]["name"].clone(), d.line))
                .collect();
            assert_eq!(p.documents, want, "text {i}");
            let lines = |e: &[SyntaxError]| e.iter().map(|e| e.line).collect::<Vec<_>>();
            assert_eq!(lines(&p.errors), lines(&alone.errors), "text {i}");
        }
        assert_eq!(parsed[0].documents.len(), 30_000);
        assert_eq!(parsed[0].documents[29_999].2, 5 * 29_999 + 1);
        assert_eq!(parsed[1].documents.len(), 2);
        assert_eq!(parsed[1].errors.len(), 1);
        assert_eq!(parsed[1].errors[0].line, 8);
        assert!(parsed[2].documents.is_empty() && parsed[2].errors.is_empty());
    }

    /// The fast reader recurses: it leaves deep documents to the full parser, which refuses
    /// them.
    #[test]
    fn deep_block_nesting_is_an_error_not_a_crash() {
        for depth in [MAX_DEPTH - 1, MAX_DEPTH + 1, 3000] {
            let mapping: String = (0..depth)
                .map(|i| format!("{}a:\n", " ".repeat(i)))
                .collect();
            let sequence: String = (0..depth)
                .map(|i| format!("{}-\n", " ".repeat(i)))
                .collect();
            for text in [mapping, sequence] {
                readers_agree(&text);
                assert_eq!(read_fast(&text), depth < MAX_DEPTH, "{depth}");
                let result = parse_documents(&text);
                assert_eq!(result.is_ok(), depth < MAX_DEPTH, "{depth}: {result:?}");
            }
        }
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
            ("yes", serde_json::json!(true)),
            ("10.0.0.0/8", serde_json::json!("10.0.0.0/8")),
            ("~", serde_json::json!(null)),
            ("True", serde_json::json!(true)),
            (".nan", serde_json::json!(null)),
        ] {
            assert_eq!(plain_scalar(text), want, "{text}");
        }
    }

    /// The fast reader and the full parser give the same documents, lines and errors.
    fn readers_agree(text: &str) {
        let [fast, full] = readings(text);
        assert_eq!(fast, full, "{text:?}");
    }

    /// Whether the fast reader reads every document of `text` itself.
    fn read_fast(text: &str) -> bool {
        let mut reader = block::Reader::new(text);
        let mut events = Vec::new();
        std::iter::from_fn(|| reader.next_document(&mut events))
            .all(|next| matches!(next, block::Next::Document))
    }

    #[test]
    fn the_fast_reader_reads_manifests_as_the_full_parser_does() {
        let manifest = "# a comment\napiVersion: v1\nkind: Pod\nmetadata:\n  name: web-1  # trailing\n  namespace: 'shop'\n  labels:\n    app.kubernetes.io/name: \"web\"\n    tier: it''s\n  annotations: {}\nspec:\n  containers:\n  - name: c\n    image: nginx:1.27\n    ports:\n    - containerPort: 8080\n      name: http\n      protocol: TCP\n    -\n    - []\n  hostNetwork: false\n  list:\n  - - nested\nstatus:\n  podIP: 10.0.0.1\n  podIPs:\n  - ip: 10.0.0.1\n  - ip: fd00::1\n";
        let manifest = manifest.replace("  list:\n  - - nested\n", "");
        assert!(read_fast(&manifest));
        readers_agree(&manifest);
        let two = format!("---\n{manifest}---\n\n---\n# only a comment\n---\n{manifest}");
        assert!(read_fast(&two));
        readers_agree(&two);
        // What the fast reader leaves to the full parser, alone and among documents it reads.
        for other in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: |\n  text\n",
            "a: [1, 2]\n",
            "a: {b: 1}\n",
            "a: \"x\\ty\"\n",
            "a: b\n  c\n",
            "a:\n  plain\n",
            "a:\tb\n",
            "a: b\r\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "- - x\n",
            "? a\n: b\n",
            "a: b: c\n",
            "a: 'open\n",
            "a: 1\n b: 2\n",
            "--- a\n",
            "\u{feff}a: 1\n",
            "a: \u{85}\n",
        ] {
            assert!(!read_fast(other), "{other:?}");
            readers_agree(other);
            readers_agree(&format!("{manifest}---\n{other}---\n{manifest}"));
        }
    }

    /// Every manifest in the repository reads alike both ways.
    #[test]
    fn the_fast_reader_agrees_on_the_repository_manifests() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            let Ok(entries) = std::fs::read_dir(dir) else {
                return;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with('.') || name.starts_with("target") {
                    continue;
                }
                if path.is_dir() {
                    walk(&path, out);
                } else if path
                    .extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
                {
                    out.push(path);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = Vec::new();
        for dir in ["examples", "deploy", "crates", "fuzz/regressions"] {
            walk(&root.join(dir), &mut files);
        }
        assert!(files.len() > 50, "{} files", files.len());
        let mut fast = 0;
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            readers_agree(&text);
            fast += usize::from(read_fast(&text));
        }
        // Most hand-written ones use flow mappings (`{name: x}`), which the full parser reads.
        assert!(fast > 0, "none of {} read fast", files.len());
    }

    mod fast_reader {
        use proptest::prelude::*;

        /// Lines of the block subset and of what lies just outside it.
        fn line() -> impl Strategy<Value = String> {
            let indent = prop::sample::select(vec![0usize, 0, 1, 2, 2, 3, 4, 6]);
            let key = prop::sample::select(vec![
                "a",
                "b",
                "kind",
                "\"q\"",
                "'s''t'",
                "yes",
                "010",
                "a:b",
                "http://h:1/x",
                "-k",
                "<<",
                "~",
                "a b",
                "ü",
                "k#x",
                "?x",
                "'a'",
                "\"\"",
                "a ",
                "[k]",
                "{k}",
                "&k a",
            ]);
            let value = prop::sample::select(vec![
                "1",
                "-1",
                "0x1F",
                "yes",
                "~",
                "\"\"",
                "''",
                "\"a\\\"b\"",
                "'it''s'",
                "x # c",
                "x#y",
                "a, b",
                "a]",
                "{}",
                "[]",
                "[1]",
                "{ }",
                "&a v",
                "*a",
                "!!str 1",
                "|",
                ">",
                "\tx",
                "x\t",
                "é",
                "\u{85}",
                "a: b",
                "a:",
                "x  ",
                "-",
                "- x",
                "@x",
                "`x",
                "%x",
                "'open",
                "\"open",
                "\"a\" b",
                "'a' # c",
                "[] x",
                "{}#",
                ".5",
                "2024-01-02",
                "--x",
                ":x",
                "?",
                "x\r",
            ]);
            let fragment = prop_oneof![
                (key.clone(), value.clone()).prop_map(|(k, v)| format!("{k}: {v}")),
                key.clone().prop_map(|k| format!("{k}:")),
                value.clone().prop_map(|v| format!("- {v}")),
                (key.clone(), value.clone()).prop_map(|(k, v)| format!("- {k}: {v}")),
                key.prop_map(|k| format!("- {k}:")),
                value.prop_map(|v| v.to_string()),
                prop::sample::select(vec![
                    "-",
                    "---",
                    "--- # c",
                    "--- x",
                    "# c",
                    "",
                    "...",
                    "%YAML 1.2",
                    "- -",
                    "- # c",
                    "a:  # c",
                    "\t",
                    "  ",
                ])
                .prop_map(str::to_string),
            ];
            (indent, fragment).prop_map(|(n, f)| format!("{}{f}", " ".repeat(n)))
        }

        proptest! {
            #![proptest_config(palisade_test_support::proptest_config(4000, 0x5eed_2026))]

            #[test]
            fn the_fast_reader_agrees_with_the_full_parser(
                lines in prop::collection::vec(line(), 1..14),
                newline_at_end in any::<bool>(),
            ) {
                let mut text = lines.join("\n");
                if newline_at_end {
                    text.push('\n');
                }
                super::readers_agree(&text);
            }

            /// Any text at all of YAML's significant characters: the same readings.
            #[test]
            fn the_fast_reader_agrees_on_any_text(
                text in "[a-c0-9:#'\"\\{}\\[\\],&*!|>%@?\\-. \n\t\r~é]{0,80}",
            ) {
                super::readers_agree(&text);
            }
        }
    }
}
