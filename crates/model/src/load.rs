//! Loading: paths (files, directories, `-` for stdin) → documents → objects → a [`Cluster`].

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::convert::stand_in::{StandIn, stand_in};
use crate::convert::{admin, core, netpol, service, workload};
use crate::diag::{Ctx, Diagnostic, Severity, join};
use crate::object::Object;
use crate::objects::{
    Cluster, FieldLines, LINT_IGNORE_ANNOTATION, NetworkPolicyApi, Origin, STAGED_ANNOTATION,
};
use crate::tree::TreeEntry;
use crate::types::PolicyKind;
use crate::yaml::{self, LineMap};

/// How to treat invalid objects.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Skip invalid objects (reporting them) instead of failing.
    pub skip_invalid: bool,
    /// Keep the lines of the fields of the objects lint reports on ([`Origin::fields`]) and
    /// the origins of the objects read but not kept ([`Loaded::set_aside`]); other
    /// commands leave them out, which keeps large clusters cheap.
    pub field_lines: bool,
}

/// Why loading failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A path could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The input is invalid; every problem is listed.
    #[error("{} invalid input error(s)", .0.iter().filter(|d| d.severity == Severity::Error).count())]
    Invalid(Vec<Diagnostic>),
}

/// What was loaded, and what is worth telling the user about it.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The objects.
    pub cluster: Cluster,
    /// Notices (skipped kinds, implied namespaces, fail-closed peers) and, with
    /// `skip_invalid`, the errors of the objects that were skipped.
    pub diagnostics: Vec<Diagnostic>,
    /// One notice per object behind the summary lines of `diagnostics` (each skipped
    /// object of a kind Palisade does not read, each pod without an address): what a
    /// `--verbose` run lists.
    pub details: Vec<Diagnostic>,
    /// The origins, with their field lines, of the objects read but not kept that lint
    /// still places findings on: invalid ones skipped, the second object of one name, and
    /// objects of other kinds that carry the lint-ignore annotation.
    pub set_aside: Vec<Origin>,
}

/// Most bytes read from one source (a file or stdin): four times a 100,000-pod
/// `kubectl get -o yaml` dump (about 300 MB). A larger source is refused, not truncated.
pub const MAX_SOURCE_BYTES: u64 = 1 << 30;

/// How standard input (`-f -`) is named in messages and origins.
pub const STDIN_NAME: &str = "<stdin>";

/// The name of the input `path` in messages: [`STDIN_NAME`] for `-`.
fn source_name(path: Option<&PathBuf>) -> String {
    match path {
        Some(p) if p.as_os_str() != "-" => p.display().to_string(),
        _ => STDIN_NAME.to_string(),
    }
}

/// Most bytes read by one load, all sources together.
pub const MAX_TOTAL_BYTES: u64 = 2 << 30;

/// Reads every path: files, directories (recursively, `*.yaml`, `*.yml`, `*.json`, in name
/// order, skipping hidden entries) and `-` for stdin. At most [`MAX_SOURCE_BYTES`] are read from one source and
/// [`MAX_TOTAL_BYTES`] in all; a source that is not UTF-8 text is an error at its first
/// bad line.
pub fn load_paths(paths: &[PathBuf], options: LoadOptions) -> Result<Loaded, LoadError> {
    let raw = read_raw(paths)?;
    let mut loader = Loader::named(source_name(paths.first()));
    loader.field_lines = options.field_lines;
    let mut texts = Vec::new();
    for (name, bytes) in raw {
        match String::from_utf8(bytes) {
            Ok(text) => texts.push((name, text)),
            Err(e) => {
                let valid_up_to = e.utf8_error().valid_up_to();
                loader.not_text(&name, e.as_bytes(), valid_up_to);
                // The whole documents before the broken one still load (and count under
                // --skip-invalid); never a cut document, which could say less than written.
                let bytes = e.into_bytes();
                let valid = std::str::from_utf8(&bytes[..valid_up_to]).unwrap_or_default();
                let keep = last_document_marker(valid).unwrap_or(0);
                if keep > 0 {
                    texts.push((name, valid[..keep].to_string()));
                }
            }
        }
    }
    loader.parse_all(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())));
    loader.finish(options)
}

/// The (name, text) of every input `-f` names: files, directories (recursively, `*.yaml`,
/// `*.yml`, `*.json`, in name order) and `-` for stdin (named [`STDIN_NAME`]), within the size
/// limits; a source that is not UTF-8 is an error at its first bad line, and an input
/// with no text at all (an empty directory, empty stdin) is an error, as for [`load_paths`].
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<(String, String)>, LoadError> {
    let mut out = Vec::new();
    let mut loader = Loader::named(source_name(paths.first()));
    for (name, bytes) in read_raw(paths)? {
        loader.sources += 1;
        match String::from_utf8(bytes) {
            Ok(text) => out.push((name, text)),
            Err(e) => loader.not_text(&name, e.as_bytes(), e.utf8_error().valid_up_to()),
        }
    }
    if loader.errors.is_empty() && out.iter().all(|(_, text)| text.trim().is_empty()) {
        loader.errors.push(loader.nothing_loaded(false));
    }
    if loader.errors.is_empty() {
        Ok(out)
    } else {
        Err(LoadError::Invalid(loader.errors))
    }
}

/// The bytes of every input, within [`MAX_SOURCE_BYTES`] and [`MAX_TOTAL_BYTES`].
fn read_raw(paths: &[PathBuf]) -> Result<Vec<(String, Vec<u8>)>, LoadError> {
    let mut raw: Vec<(String, Vec<u8>)> = Vec::new();
    let mut total = 0u64;
    for path in paths {
        if path.as_os_str() == "-" {
            let bytes = read_limited(std::io::stdin().lock(), path, total, 0)?;
            total += bytes.len() as u64;
            raw.push((STDIN_NAME.to_string(), bytes));
        } else {
            for file in expand(path)? {
                let reader = std::fs::File::open(&file).map_err(|source| LoadError::Io {
                    path: file.clone(),
                    source,
                })?;
                // The file's size as it was opened: the buffer is allocated once.
                let expected = reader.metadata().map_or(0, |m| m.len());
                let bytes = read_limited(reader, &file, total, expected)?;
                total += bytes.len() as u64;
                raw.push((file.display().to_string(), bytes));
            }
        }
    }
    Ok(raw)
}

/// Reads at most [`MAX_SOURCE_BYTES`] (and what is left of [`MAX_TOTAL_BYTES`] after
/// `so_far`); more is an error naming the path. `expected` is the size the source is
/// expected to have (0 when unknown): room for it is made before reading.
fn read_limited(
    reader: impl Read,
    path: &Path,
    so_far: u64,
    expected: u64,
) -> Result<Vec<u8>, LoadError> {
    read_within(
        reader,
        path,
        so_far,
        expected,
        MAX_SOURCE_BYTES,
        MAX_TOTAL_BYTES,
    )
}

/// [`read_limited`] with the limits given.
fn read_within(
    reader: impl Read,
    path: &Path,
    so_far: u64,
    expected: u64,
    per_source: u64,
    per_run: u64,
) -> Result<Vec<u8>, LoadError> {
    let limit = per_source.min(per_run.saturating_sub(so_far));
    // One byte past the limit tells a source over it; one past the size expected, the
    // end of the source.
    let room = usize::try_from(expected.min(limit) + 1).unwrap_or(0);
    let mut bytes = Vec::with_capacity(room);
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        let message = if limit < per_source {
            format!(
                "the input is larger than {} MiB, the most one run reads",
                per_run >> 20
            )
        } else {
            format!(
                "larger than {} MiB, the most Palisade reads from one source",
                per_source >> 20
            )
        };
        return Err(LoadError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, message),
        });
    }
    Ok(bytes)
}

/// The offset of the last line of `text` that is a document marker (`---` then a space, a
/// tab or the end of the line), if any after the first line.
fn last_document_marker(text: &str) -> Option<usize> {
    let mut end = text.len();
    while let Some(p) = text[..end].rfind("\n---") {
        let start = p + 1;
        match text.as_bytes().get(start + 3) {
            None | Some(b' ' | b'\t' | b'\r' | b'\n') => return Some(start),
            _ => end = p,
        }
    }
    None
}

/// The files `path` names: itself, or the manifests under the directory
/// ([`crate::tree::manifest_tree`]: FIFOs and other non-regular files are skipped, a
/// directory reached twice is read once); a symlink loop is an error.
fn expand(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = crate::tree::manifest_tree(path)
        .map_err(|(path, source)| LoadError::Io { path, source })?;
    let mut out = Vec::new();
    for entry in entries {
        match entry {
            TreeEntry::File(file) => out.push(file),
            TreeEntry::Loop(dir) => {
                return Err(LoadError::Io {
                    path: dir,
                    source: std::io::Error::other(
                        "symbolic link loop: this directory contains itself",
                    ),
                });
            }
            TreeEntry::NotRegular(_) => {}
        }
    }
    Ok(out)
}

/// Loads named texts (name, content), as if each were a file.
pub fn load_sources<'a>(
    sources: impl IntoIterator<Item = (&'a str, &'a str)>,
    options: LoadOptions,
) -> Result<Loaded, LoadError> {
    load_bodies(
        sources
            .into_iter()
            .map(|(name, text)| (name, Body::Text(text))),
        options,
    )
}

/// [`load_sources`] for named bodies, each a text or one object already parsed.
pub fn load_bodies<'a>(
    sources: impl IntoIterator<Item = (&'a str, Body<'a>)>,
    options: LoadOptions,
) -> Result<Loaded, LoadError> {
    let sources: Vec<(&str, Body<'_>)> = sources.into_iter().collect();
    let mut loader = Loader::named(sources.first().map_or("<input>", |s| s.0).to_string());
    loader.field_lines = options.field_lines;
    loader.read_all(sources);
    loader.finish(options)
}

/// What a named input holds: manifest text (YAML or JSON, any number of objects), or one
/// object already parsed (as the Kubernetes API gives it), read as a JSON text of one line
/// would be: every diagnostic about it is on line 1.
#[derive(Debug, Clone, PartialEq)]
pub enum Body<'a> {
    /// YAML or JSON text.
    Text(&'a str),
    /// One object.
    Object(Value),
}

/// What [`decode_texts`] read: each text's objects, as they are, for a consumer that
/// keeps its own state (the node agent).
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// The valid objects (no implied namespaces; each object's `origin.file` names its text).
    pub cluster: Cluster,
    /// The objects that failed validation.
    pub invalid: Vec<Invalid>,
    /// Every diagnostic: notices, warnings, and errors (the invalid objects' and those of
    /// text that could not be parsed into objects at all).
    pub diagnostics: Vec<Diagnostic>,
}

/// An object that failed validation, with as much of its identity as could be read.
#[derive(Debug, Clone)]
pub struct Invalid {
    /// Its `kind` (empty when unreadable).
    pub kind: String,
    /// `metadata.namespace`, if any.
    pub namespace: Option<String>,
    /// `metadata.name`, if readable.
    pub name: Option<String>,
    /// Where it was read.
    pub origin: Origin,
    /// For a policy whose subject is readable: what isolates that subject meanwhile.
    pub stand_in: Option<StandIn>,
}

impl Invalid {
    fn of(item: &Item<'_>) -> Invalid {
        let text = |p: &str| {
            item.value
                .pointer(p)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let kind = text("/kind").unwrap_or_default();
        let stand_in = stand_in(&kind, item.value, item.lines, &item.origin);
        Invalid {
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
            kind,
            origin: item.origin.clone(),
            stand_in,
        }
    }
}

/// Decodes named texts object by object, keeping what is valid and describing what is not,
/// without the checks that concern a whole input (emptiness, implied namespaces, order).
/// Two objects of the same kind and name are still an error.
pub fn decode_texts<'a>(sources: impl IntoIterator<Item = (&'a str, &'a str)>) -> Decoded {
    decode_bodies(
        sources
            .into_iter()
            .map(|(name, text)| (name, Body::Text(text))),
    )
}

/// [`decode_texts`] for named bodies, each a text or one object already parsed.
pub fn decode_bodies<'a>(sources: impl IntoIterator<Item = (&'a str, Body<'a>)>) -> Decoded {
    let sources: Vec<(&str, Body<'_>)> = sources.into_iter().collect();
    let mut loader = Loader::named(sources.first().map_or("<input>", |s| s.0).to_string());
    loader.read_all(sources);
    loader.add_decoded();
    let mut diagnostics = loader.errors;
    diagnostics.append(&mut loader.notices);
    // One notice per object here: the caller keeps objects (and their notices) apart.
    diagnostics.extend(
        std::mem::take(&mut loader.skipped_kinds)
            .into_values()
            .flatten(),
    );
    Decoded {
        cluster: loader.cluster,
        invalid: loader.invalid,
        diagnostics,
    }
}

/// A convenience for tests and examples: loads one YAML text, failing on any error.
pub fn load_str(text: &str) -> Result<Loaded, LoadError> {
    load_sources([("<input>", text)], LoadOptions::default())
}

#[derive(Default)]
struct Loader {
    /// What to call the input as a whole (the first path), for errors about all of it.
    input: String,
    /// Keep what lint needs of each object's text ([`LoadOptions::field_lines`]).
    field_lines: bool,
    cluster: Cluster,
    errors: Vec<Diagnostic>,
    skipped: Vec<Diagnostic>,
    notices: Vec<Diagnostic>,
    seen: HashMap<(String, Option<String>, String), Origin>,
    /// Documents read.
    documents: usize,
    /// Every object read, decoded, in input order; not yet added.
    decoded: Vec<DecodedItem>,
    /// Pods' `status.hostIP`, for nodes the input does not declare.
    host_ips: Vec<core::HostIp>,
    /// Sources read (files, stdin, named texts).
    sources: usize,
    /// Objects of kinds Palisade does not read, by `apiVersion kind`: one notice each.
    skipped_kinds: BTreeMap<String, Vec<Diagnostic>>,
    /// The objects that failed validation.
    invalid: Vec<Invalid>,
    /// Each pod's lines of `status.podIPs` and `status.hostIP`, by where it was read: the
    /// pods the loader warns about keep them (see [`Loader::keep_warned_lines`]).
    pod_lines: HashMap<(Arc<str>, usize), [usize; 2]>,
    /// Where the objects read but not kept were ([`Loaded::set_aside`]).
    set_aside: Vec<Origin>,
}

/// One object to decode: a document, or an item of a `List` in one.
struct Item<'d> {
    value: &'d Value,
    lines: &'d LineMap,
    prefix: String,
    origin: Origin,
}

/// What decoding one item gives: its diagnostics, and the object with its kind name and
/// whether it is staged.
type ItemResult = (Vec<Diagnostic>, Option<(String, Reading, bool)>);

/// One decoded item, with what identifies it should it be invalid.
struct DecodedItem {
    origin: Origin,
    result: ItemResult,
    /// Set when `result` has an error.
    invalid: Option<Invalid>,
    /// The line of `metadata.name`, for the error about a second object of one name.
    name_line: usize,
    /// A pod's lines of `status.podIPs` and `status.hostIP`, for the warnings about them.
    pod_lines: Option<[usize; 2]>,
}

/// Decodes the objects of one document of `file` (the document itself, or a `List`'s items).
/// With `keep`, the items keep the lines lint needs ([`LoadOptions::field_lines`]).
fn decode_document(file: &Arc<str>, document: yaml::Document, keep: bool) -> Vec<DecodedItem> {
    let origin = Origin {
        file: file.clone(),
        line: document.line,
        fields: None,
    };
    let mut items = Vec::new();
    flatten(
        &document.value,
        &document.lines,
        String::new(),
        origin,
        &mut items,
    );
    items
        .iter_mut()
        .map(|item| {
            if keep {
                item.origin.fields = field_lines(item);
            }
            let result = decode(item);
            let failed = result.0.iter().any(|d| d.severity == Severity::Error);
            let line = |field: &str| item.lines.line_of(&join(&item.prefix, field));
            let is_pod = item.value.get("kind").and_then(Value::as_str) == Some("Pod");
            DecodedItem {
                origin: item.origin.clone(),
                invalid: failed.then(|| Invalid::of(item)),
                name_line: (keep.then(|| line("metadata.name")).flatten())
                    .unwrap_or(item.origin.line),
                pod_lines: (keep && is_pod).then(|| {
                    ["status.podIPs", "status.hostIP"].map(|f| line(f).unwrap_or(item.origin.line))
                }),
                result,
            }
        })
        .collect()
}

/// What lint keeps of an item's text: the kinds it reports on, and any object with the
/// lint-ignore annotation, keep the lines of their fields; others keep nothing.
fn field_lines(item: &Item<'_>) -> Option<Arc<FieldLines>> {
    let lint_ignore = item
        .value
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LINT_IGNORE_ANNOTATION))
        .and_then(Value::as_str);
    let kind = item.value.get("kind").and_then(Value::as_str);
    let reported = matches!(
        kind,
        Some(
            "NetworkPolicy"
                | "AdminNetworkPolicy"
                | "BaselineAdminNetworkPolicy"
                | "ClusterNetworkPolicy"
                | "Service"
        )
    );
    (reported || lint_ignore.is_some()).then(|| {
        Arc::new(FieldLines {
            lines: item.lines.subtree(&item.prefix, item.origin.line),
            lint_ignore: lint_ignore.map(str::to_string),
        })
    })
}

/// What one document decodes to.
// The large variant is the common one: boxing it would cost an allocation per object.
#[allow(clippy::large_enum_variant)]
enum Reading {
    /// An object of a kind Palisade reads; a pod with its node's address when its status
    /// gives one (boxed: few pods have one, and every document's result is held at once).
    Object(Object, Option<Box<core::HostIp>>),
    /// An object of a kind Palisade does not read (`apiVersion kind`), and the notice
    /// saying so.
    Skipped(String, Diagnostic),
}

impl From<Object> for Reading {
    fn from(object: Object) -> Reading {
        Reading::Object(object, None)
    }
}

impl Loader {
    fn named(input: String) -> Self {
        Loader {
            input,
            ..Loader::default()
        }
    }

    /// Parses and decodes the texts concurrently (sharing one alias budget), each document
    /// as soon as it is read; the objects keep the input order.
    fn parse_all<'a>(&mut self, sources: impl IntoIterator<Item = (&'a str, &'a str)>) {
        self.read_all(
            sources
                .into_iter()
                .map(|(name, text)| (name, Body::Text(text))),
        );
    }

    /// [`Loader::parse_all`] for bodies: the texts are parsed concurrently, the objects
    /// decoded as they are; everything keeps the input order.
    fn read_all<'a>(&mut self, sources: impl IntoIterator<Item = (&'a str, Body<'a>)>) {
        let sources: Vec<(Arc<str>, Body<'_>)> = sources
            .into_iter()
            .map(|(name, body)| (Arc::from(name), body))
            .collect();
        let (names, texts): (Vec<usize>, Vec<&str>) = sources
            .iter()
            .enumerate()
            .filter_map(|(i, (_, body))| match body {
                Body::Text(text) => Some((i, *text)),
                Body::Object(_) => None,
            })
            .unzip();
        let keep = self.field_lines;
        let parsed = yaml::map_texts(&texts, &yaml::AliasBudget::default(), &|i, document| {
            decode_document(&sources[names[i]].0, document, keep)
        });
        self.decoded
            .reserve(parsed.iter().map(|p| p.documents.len()).sum());
        let mut parsed = parsed.into_iter();
        for (file, body) in sources {
            match body {
                Body::Text(_) => {
                    let result = parsed.next().unwrap_or_default();
                    self.source(file, result);
                }
                Body::Object(value) => {
                    let document = yaml::Document {
                        value,
                        line: 1,
                        lines: LineMap::default(),
                    };
                    let items = decode_document(&file, document, keep);
                    self.source(
                        file,
                        yaml::Parsed {
                            documents: vec![items],
                            errors: Vec::new(),
                        },
                    );
                }
            }
        }
    }

    fn source(&mut self, file: Arc<str>, parsed: yaml::Parsed<Vec<DecodedItem>>) {
        self.sources += 1;
        for e in parsed.errors {
            self.errors.push(Diagnostic {
                severity: Severity::Error,
                file: file.clone(),
                line: e.line,
                object: String::new(),
                field: String::new(),
                message: format!("YAML syntax error: {}", e.message),
            });
        }
        self.documents += parsed.documents.len();
        self.decoded.extend(parsed.documents.into_iter().flatten());
    }

    /// A source that is not UTF-8: an error at the line of its first bad byte.
    fn not_text(&mut self, name: &str, bytes: &[u8], valid_up_to: usize) {
        let line = 1 + bytes[..valid_up_to].iter().filter(|b| **b == b'\n').count();
        self.sources += 1;
        self.errors.push(Diagnostic {
            severity: Severity::Error,
            file: Arc::from(name),
            line,
            object: String::new(),
            field: String::new(),
            message: format!(
                "not UTF-8 text (byte {valid_up_to} is not valid UTF-8); manifests are YAML or JSON text"
            ),
        });
    }

    /// Adds the decoded objects in input order, setting the invalid ones aside.
    fn add_decoded(&mut self) {
        // Room for every object at once: growing the map and the pod list step by step
        // copies them into fresh memory several times (100,000 pods: a tenth of a second).
        let pods = self
            .decoded
            .iter()
            .filter(|d| matches!(d.result.1, Some((_, Reading::Object(Object::Pod(_), _), _))))
            .count();
        self.seen.reserve(self.decoded.len());
        self.cluster.pods.reserve(pods);
        for item in std::mem::take(&mut self.decoded) {
            let (mut diags, object) = item.result;
            if let Some(invalid) = item.invalid {
                if invalid.origin.fields.is_some() {
                    self.set_aside.push(invalid.origin.clone());
                }
                self.invalid.push(invalid);
                self.errors.append(&mut diags);
                continue;
            }
            self.notices.append(&mut diags);
            if let Some(lines) = item.pod_lines {
                let place = (item.origin.file.clone(), item.origin.line);
                self.pod_lines.insert(place, lines);
            }
            if let Some((kind, object, staged)) = object {
                self.add(kind, object, &item.origin, staged, item.name_line);
            }
        }
    }

    /// Adds a decoded object, refusing a second object of the same kind and name (its
    /// origin is set aside with the line of its name).
    fn add(
        &mut self,
        kind: String,
        reading: Reading,
        origin: &Origin,
        staged: bool,
        name_line: usize,
    ) {
        let (object, host) = match reading {
            Reading::Skipped(label, notice) => {
                if origin.fields.is_some() {
                    self.set_aside.push(origin.clone());
                }
                self.skipped_kinds.entry(label).or_default().push(notice);
                return;
            }
            Reading::Object(object, host) => (object, host),
        };
        // Identified by the kind as written (a workload's, not the pod's it stands for).
        let key = object.key(false);
        let id = (kind.clone(), key.namespace, key.name);
        if let Some(first) = self.seen.get(&id) {
            let object_name = match &id.1 {
                Some(ns) => format!("{ns}/{}", id.2),
                None => id.2.clone(),
            };
            self.errors.push(Diagnostic {
                severity: Severity::Error,
                file: origin.file.clone(),
                line: origin.line,
                object: format!("{kind} {object_name}"),
                field: "metadata.name".into(),
                message: format!(
                    "Duplicate value: {kind} already defined at {}:{}",
                    first.file, first.line
                ),
            });
            let mut origin = origin.clone();
            origin.fields.get_or_insert_with(|| {
                Arc::new(FieldLines {
                    lines: LineMap::of_fields(origin.line, &[("metadata.name", name_line)]),
                    lint_ignore: None,
                })
            });
            self.set_aside.push(origin);
            return;
        }
        self.seen.insert(id, origin.clone());
        self.cluster.push(object, staged);
        self.host_ips.extend(host.map(|h| *h));
    }

    fn finish(mut self, options: LoadOptions) -> Result<Loaded, LoadError> {
        let had_documents = self.documents > 0;
        self.add_decoded();
        self.errors
            .sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        if !self.errors.is_empty() && !options.skip_invalid {
            return Err(LoadError::Invalid(self.errors));
        }
        if self.cluster.is_empty() && self.errors.is_empty() {
            // Finding nothing to read is a mistake (an empty directory, empty stdin), not
            // a cluster where everything is allowed. (Objects skipped as invalid were
            // found, and reported.)
            return Err(LoadError::Invalid(vec![self.nothing_loaded(had_documents)]));
        }
        self.skipped = std::mem::take(&mut self.errors);
        self.imply_namespaces();
        let (nodes, notices) = core::nodes_from_host_ips(&self.cluster.nodes, &self.host_ips);
        self.cluster.nodes.extend(nodes);
        self.notices.extend(notices);
        self.cluster.sort();
        let mut diagnostics = std::mem::take(&mut self.skipped);
        diagnostics.extend(shared_ip_warnings(&self.cluster));
        diagnostics.append(&mut self.notices);
        let mut details = Vec::new();
        for (label, notices) in std::mem::take(&mut self.skipped_kinds) {
            let first = &notices[0];
            diagnostics.push(Diagnostic {
                severity: Severity::Notice,
                file: first.file.clone(),
                line: first.line,
                object: String::new(),
                field: String::new(),
                message: format!(
                    "{label} is not a kind Palisade reads; {} object(s) skipped (--verbose lists them)",
                    notices.len()
                ),
            });
            details.extend(notices);
        }
        let (summary, pending) = pods_without_address(&self.cluster);
        diagnostics.extend(summary);
        details.extend(pending);
        self.keep_warned_lines(&diagnostics);
        Ok(Loaded {
            cluster: self.cluster,
            diagnostics,
            details,
            set_aside: self.set_aside,
        })
    }

    /// The pods a warning names (a shared address, a disagreeing host IP) keep the lines
    /// of the fields warned about; other pods keep none, which keeps large clusters cheap.
    fn keep_warned_lines(&mut self, diagnostics: &[Diagnostic]) {
        let warned: std::collections::HashSet<(&str, usize)> = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning && d.object.starts_with("Pod "))
            .map(|d| (&*d.file, d.line))
            .collect();
        if warned.is_empty() {
            return;
        }
        for pod in &mut self.cluster.pods {
            let origin = &mut pod.origin;
            if origin.fields.is_some() || !warned.contains(&(&*origin.file, origin.line)) {
                continue;
            }
            let Some([ips, host]) = self.pod_lines.get(&(origin.file.clone(), origin.line)) else {
                continue;
            };
            let fields = [("status.podIPs", *ips), ("status.hostIP", *host)];
            origin.fields = Some(Arc::new(FieldLines {
                lines: LineMap::of_fields(origin.line, &fields),
                lint_ignore: None,
            }));
        }
    }

    /// The error for a load that found no object to read.
    fn nothing_loaded(&self, had_documents: bool) -> Diagnostic {
        let message = if self.sources == 0 {
            "no manifests: no *.yaml, *.yml or *.json file in the input".to_string()
        } else if !had_documents {
            "no objects: the input holds no YAML or JSON document".to_string()
        } else {
            "no objects Palisade reads (Namespace, Pod, Node, NetworkPolicy, AdminNetworkPolicy, BaselineAdminNetworkPolicy, ClusterNetworkPolicy, or a Deployment, StatefulSet, DaemonSet, ReplicaSet, Job or CronJob) in the input".to_string()
        };
        Diagnostic {
            severity: Severity::Error,
            file: Arc::from(self.input.as_str()),
            line: 1,
            object: String::new(),
            field: String::new(),
            message,
        }
    }

    /// Namespaces that pods or policies live in but that were not declared are assumed,
    /// with only the `kubernetes.io/metadata.name` label.
    fn imply_namespaces(&mut self) {
        let c = &mut self.cluster;
        let declared: std::collections::HashSet<String> =
            c.namespaces.iter().map(|n| n.name.clone()).collect();
        let mut implied: BTreeMap<String, Origin> = BTreeMap::new();
        let used = c
            .pods
            .iter()
            .map(|p| (&p.namespace, &p.origin))
            .chain(c.network_policies.iter().map(|p| (&p.namespace, &p.origin)));
        for (ns, origin) in used {
            if !declared.contains(ns) {
                implied.entry(ns.clone()).or_insert_with(|| origin.clone());
            }
        }
        for (ns, origin) in implied {
            self.notices.push(Diagnostic {
                severity: Severity::Notice,
                file: origin.file.clone(),
                line: origin.line,
                object: format!("Namespace {ns}"),
                field: String::new(),
                message:
                    "not declared; assumed to exist with only the kubernetes.io/metadata.name label"
                        .into(),
            });
            c.namespaces.push(crate::objects::Namespace::implied(&ns));
        }
    }
}

/// Pods that have no address (not yet scheduled, Pending) and are not host-network or a
/// workload's representative: one summary notice, and one notice per pod.
fn pods_without_address(cluster: &Cluster) -> (Option<Diagnostic>, Vec<Diagnostic>) {
    let pending: Vec<Diagnostic> = cluster
        .pods
        .iter()
        .filter(|p| {
            p.ips.is_empty()
                && !p.host_network
                && crate::convert::workload::workload_of(p).is_none()
        })
        .map(|p| Diagnostic {
            severity: Severity::Notice,
            file: p.origin.file.clone(),
            line: p.origin.line,
            object: format!("Pod {}", p.key()),
            field: "status.podIP".into(),
            message: "no address (Pending, or completed: Succeeded and Failed pods release theirs): left out of the matrix; it still counts for selectors"
                .into(),
        })
        .collect();
    let summary = pending.first().map(|first| Diagnostic {
        message: format!(
            "{} pod(s) without an address (Pending or completed), left out of the matrix (--verbose lists them)",
            pending.len()
        ),
        object: String::new(),
        field: String::new(),
        ..first.clone()
    });
    (summary, pending)
}

/// A warning for every pod whose IP another (non-host-network) pod also has, naming both.
fn shared_ip_warnings(cluster: &Cluster) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (ip, pods) in cluster.duplicate_pod_ips() {
        let first = pods[0];
        for pod in &pods[1..] {
            out.push(Diagnostic {
                severity: Severity::Warning,
                file: pod.origin.file.clone(),
                line: pod.origin.line,
                object: format!("Pod {}", pod.key()),
                field: "status.podIPs".into(),
                message: format!(
                    "{ip} is also the IP of Pod {} ({}:{}); Palisade cannot tell these pods apart, so connections to and from {ip} fail closed",
                    first.key(),
                    first.origin.file,
                    first.origin.line
                ),
            });
        }
    }
    out
}

/// Collects the objects of a document: itself, or the items of a `List` / `*List`.
fn flatten<'d>(
    value: &'d Value,
    lines: &'d LineMap,
    prefix: String,
    origin: Origin,
    out: &mut Vec<Item<'d>>,
) {
    let kind = value
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let is_list = kind == "List" || (kind.ends_with("List") && value.get("items").is_some());
    if !is_list || value.get("apiVersion").and_then(Value::as_str).is_none() {
        out.push(Item {
            value,
            lines,
            prefix,
            origin,
        });
        return;
    }
    for (i, item) in value
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = if prefix.is_empty() {
            format!("items[{i}]")
        } else {
            format!("{prefix}.items[{i}]")
        };
        let line = lines.line_of(&p).unwrap_or(origin.line);
        flatten(
            item,
            lines,
            p,
            Origin {
                file: origin.file.clone(),
                line,
                fields: None,
            },
            out,
        );
    }
}

/// Decodes and validates one object: its diagnostics, and the object with its kind.
fn decode(item: &Item<'_>) -> ItemResult {
    let value = item.value;
    let mut ctx = Ctx::new(item.origin.clone(), item.lines, item.prefix.clone());
    let (Some(api), Some(kind)) = (
        value.get("apiVersion").and_then(Value::as_str),
        value.get("kind").and_then(Value::as_str),
    ) else {
        let field = if value.get("kind").is_none() {
            "kind"
        } else {
            "apiVersion"
        };
        ctx.error(
            field,
            "Required value: every object must have apiVersion and kind",
        );
        return (ctx.diags, None);
    };
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    ctx.object = match value.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    };
    let origin = item.origin.clone();
    let workload_kind = workload::WorkloadKind::of(api, kind);
    let object = match (api, kind) {
        _ if workload_kind.is_some() => workload_kind
            .and_then(|k| workload::workload(&mut ctx, value, k, origin))
            .map(|p| Object::Pod(p).into()),
        ("v1", "Namespace") => {
            core::namespace(&mut ctx, value, origin).map(|o| Object::Namespace(o).into())
        }
        ("v1", "Pod") => core::pod(&mut ctx, value, origin)
            .map(|(p, h)| Reading::Object(Object::Pod(p), h.map(Box::new))),
        ("v1", "Node") => core::node(&mut ctx, value, origin).map(|o| Object::Node(o).into()),
        ("v1", "Service") => {
            service::service(&mut ctx, value, origin).map(|o| Object::Service(o).into())
        }
        ("discovery.k8s.io/v1", "EndpointSlice") => {
            service::endpoint_slice(&mut ctx, value, origin)
                .map(|o| Object::EndpointSlice(o).into())
        }
        ("networking.k8s.io/v1" | "extensions/v1beta1", "NetworkPolicy") => {
            let version = if api == "extensions/v1beta1" {
                NetworkPolicyApi::ExtensionsV1beta1
            } else {
                NetworkPolicyApi::V1
            };
            netpol::network_policy(&mut ctx, value, version, origin)
                .map(|o| Object::NetworkPolicy(o).into())
        }
        (
            "policy.networking.k8s.io/v1alpha1",
            "AdminNetworkPolicy" | "BaselineAdminNetworkPolicy",
        )
        | ("policy.networking.k8s.io/v1alpha2", "ClusterNetworkPolicy") => {
            let k = match kind {
                "AdminNetworkPolicy" => PolicyKind::AdminNetworkPolicy,
                "BaselineAdminNetworkPolicy" => PolicyKind::BaselineAdminNetworkPolicy,
                _ => PolicyKind::ClusterNetworkPolicy,
            };
            admin::admin_policy(&mut ctx, value, k, origin).map(|o| Object::Admin(o).into())
        }
        (
            _,
            "Namespace"
            | "Pod"
            | "Node"
            | "Service"
            | "EndpointSlice"
            | "NetworkPolicy"
            | "AdminNetworkPolicy"
            | "BaselineAdminNetworkPolicy"
            | "ClusterNetworkPolicy",
        ) => {
            // A policy we cannot read must not vanish silently: that would fail open.
            ctx.error(
                "apiVersion",
                format!(
                    "Unsupported value: {api:?}: Palisade does not read {kind} in this API version"
                ),
            );
            None
        }
        _ if unknown_kind_of_read_group(api, kind) => {
            // `NetworkPolicies` for `NetworkPolicy`: a typo must not drop a policy silently.
            ctx.error(
                "kind",
                format!(
                    "Unsupported value: {kind:?}: {api} has no such kind (Palisade reads {})",
                    read_kinds(api)
                ),
            );
            None
        }
        _ => {
            let mut notice = Ctx::new(item.origin.clone(), item.lines, item.prefix.clone());
            notice.object = ctx.object.clone();
            notice.notice(
                "kind",
                format!("{api} {kind} is not a kind Palisade reads; skipped"),
            );
            notice
                .diags
                .pop()
                .map(|d| Reading::Skipped(format!("{api} {kind}"), d))
        }
    };
    let staged = matches!(
        object,
        Some(Reading::Object(
            Object::NetworkPolicy(_) | Object::Admin(_),
            _
        ))
    ) && staged(&mut ctx, value);
    (ctx.diags, object.map(|o| (kind.to_string(), o, staged)))
}

/// The kinds each API group that Palisade reads serves (all versions together): a kind
/// outside these in such a group is a typo, not a kind Palisade may skip.
const GROUP_KINDS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "Binding",
            "ComponentStatus",
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "Namespace",
            "Node",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "Pod",
            "PodTemplate",
            "ReplicationController",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
            "Status",
            "EphemeralContainers",
            "PodStatusResult",
            "RangeAllocation",
            "SerializedReference",
            "List",
        ],
    ),
    (
        "networking.k8s.io",
        &[
            "NetworkPolicy",
            "Ingress",
            "IngressClass",
            "IPAddress",
            "ServiceCIDR",
            "ClusterCIDR",
        ],
    ),
    ("discovery.k8s.io", &["EndpointSlice"]),
    (
        "policy.networking.k8s.io",
        &[
            "AdminNetworkPolicy",
            "BaselineAdminNetworkPolicy",
            "ClusterNetworkPolicy",
        ],
    ),
];

/// The group of an `apiVersion` (`""` for the core `v1`).
fn api_group(api: &str) -> &str {
    api.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether `kind` is not a kind of `api`'s group, in a group Palisade reads.
fn unknown_kind_of_read_group(api: &str, kind: &str) -> bool {
    let group = api_group(api);
    GROUP_KINDS
        .iter()
        .find(|(g, _)| *g == group)
        .is_some_and(|(_, kinds)| {
            !kinds.contains(&kind)
                && !kind
                    .strip_suffix("List")
                    .is_some_and(|k| kinds.contains(&k))
        })
}

/// The kinds Palisade reads in `api`'s group, for an error message.
fn read_kinds(api: &str) -> &'static str {
    match api_group(api) {
        "" => "Namespace, Pod, Node and Service",
        "networking.k8s.io" => "NetworkPolicy",
        "discovery.k8s.io" => "EndpointSlice",
        _ => "AdminNetworkPolicy, BaselineAdminNetworkPolicy and ClusterNetworkPolicy",
    }
}

/// Whether a policy carries [`STAGED_ANNOTATION`]` = "true"`. Any value other than
/// `"true"` or `"false"` is an error: a typo must not enforce a policy meant to be staged.
fn staged(ctx: &mut Ctx<'_>, value: &Value) -> bool {
    let annotation = value
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STAGED_ANNOTATION));
    match annotation.and_then(Value::as_str) {
        None if annotation.is_none() => false,
        Some("true") => true,
        Some("false") => false,
        _ => {
            ctx.error(
                &format!("metadata.annotations[{STAGED_ANNOTATION}]"),
                "Unsupported value: must be \"true\" or \"false\"",
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_kinds_and_pods_without_an_address_are_one_line_each() {
        let yaml = "apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n";
        let loaded = load_str(yaml).unwrap();
        let lines: Vec<String> = loaded
            .diagnostics
            .iter()
            .filter(|d| !d.message.contains("not declared"))
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            lines,
            [
                "<input>:10: notice: v1 ConfigMap is not a kind Palisade reads; 1 object(s) skipped (--verbose lists them)",
                "<input>:2: notice: v1 Secret is not a kind Palisade reads; 2 object(s) skipped (--verbose lists them)",
                "<input>:12: notice: 1 pod(s) without an address (Pending or completed), left out of the matrix (--verbose lists them)",
            ]
        );
        assert_eq!(loaded.details.len(), 4, "each object behind them");
    }

    /// A typo in the kind of a group Palisade reads is an error, never a skipped object;
    /// kinds the group really has but Palisade does not read stay notices.
    #[test]
    fn an_unknown_kind_of_a_read_group_is_an_error() {
        for (api, kind) in [
            ("networking.k8s.io/v1", "NetworkPolicies"),
            ("policy.networking.k8s.io/v1alpha1", "AdminNetworkPolicies"),
            ("policy.networking.k8s.io/v1alpha2", "ClusterNetworkpolicy"),
            ("v1", "Pods"),
        ] {
            let yaml =
                format!("apiVersion: {api}\nkind: {kind}\nmetadata: {{name: a, namespace: x}}\n");
            let Err(LoadError::Invalid(errors)) = load_str(&yaml) else {
                panic!("{api} {kind} was accepted");
            };
            let text = errors[0].to_string();
            assert!(
                text.contains("kind: Unsupported value") && text.contains(kind),
                "{text}"
            );
        }
        for (api, kind) in [
            ("networking.k8s.io/v1", "Ingress"),
            ("v1", "ConfigMap"),
            ("example.com/v1", "NetworkPolicies"),
        ] {
            let yaml = format!(
                "apiVersion: {api}\nkind: {kind}\nmetadata: {{name: a, namespace: x}}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: x}}\n"
            );
            assert!(load_str(&yaml).is_ok(), "{api} {kind} refused");
        }
    }

    /// Succeeded and Failed pods released their address: they hold none, and a running pod
    /// that reuses it is not a shared address.
    #[test]
    fn completed_pods_hold_no_address() {
        let pod = |name: &str, phase: &str| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: x}}\nstatus: {{phase: {phase}, podIP: 10.0.0.7}}\n---\n"
            )
        };
        let yaml = pod("job", "Succeeded") + &pod("failed", "Failed") + &pod("web", "Running");
        let loaded = load_str(&yaml).unwrap();
        let ips = |name: &str| {
            loaded
                .cluster
                .pods
                .iter()
                .find(|p| p.name == name)
                .unwrap()
                .ips
                .clone()
        };
        assert!(ips("job").is_empty());
        assert!(ips("failed").is_empty());
        assert_eq!(
            ips("web"),
            vec!["10.0.0.7".parse::<std::net::IpAddr>().unwrap()]
        );
        assert!(
            loaded
                .diagnostics
                .iter()
                .all(|d| !d.message.contains("is also the IP")),
            "{:?}",
            loaded.diagnostics
        );
    }

    /// Regression: `-f /dev/zero` grew without bound; reading stops one byte past the
    /// limit with an error naming the file.
    #[test]
    fn bug7_reading_stops_at_the_limits() {
        let path = Path::new("/dev/zero");
        let zeros = || std::io::repeat(0);
        let err = read_within(zeros(), path, 0, 0, 2 << 20, 8 << 20).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("/dev/zero: larger than 2 MiB"), "{text}");
        let err = read_within(zeros(), path, 7 << 20, 1 << 30, 2 << 20, 8 << 20).unwrap_err();
        assert!(
            err.to_string().contains("8 MiB, the most one run reads"),
            "{err}"
        );
        let ok = read_within(&b"kind: Pod\n"[..], path, 0, 10, 2 << 20, 8 << 20).unwrap();
        assert_eq!(ok.len(), 10);
    }
}
