//! Loading: paths (files, directories, `-` for stdin) → documents → objects → a [`Cluster`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::convert::{admin, core, netpol};
use crate::diag::{Ctx, Diagnostic, Severity};
use crate::objects::{Cluster, NetworkPolicyApi, Origin};
use crate::types::PolicyKind;
use crate::yaml::{self, LineMap};

/// How to treat invalid objects.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadOptions {
    /// Skip invalid objects (reporting them) instead of failing.
    pub skip_invalid: bool,
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
}

/// Reads every path: files, directories (recursively, `*.yaml`, `*.yml`, `*.json`, in name
/// order) and `-` for stdin.
pub fn load_paths(paths: &[PathBuf], options: LoadOptions) -> Result<Loaded, LoadError> {
    let mut sources = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|source| {
                LoadError::Io {
                    path: path.clone(),
                    source,
                }
            })?;
            sources.push(("-".to_string(), text));
        } else {
            for file in expand(path)? {
                let text = std::fs::read_to_string(&file).map_err(|source| LoadError::Io {
                    path: file.clone(),
                    source,
                })?;
                sources.push((file.display().to_string(), text));
            }
        }
    }
    load_sources(
        sources.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        options,
    )
}

fn expand(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let meta = std::fs::metadata(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|source| LoadError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for e in entries {
        if e.is_dir() {
            out.extend(expand(&e)?);
        } else if matches!(
            e.extension().and_then(|x| x.to_str()),
            Some("yaml" | "yml" | "json")
        ) {
            out.push(e);
        }
    }
    Ok(out)
}

/// Loads named texts (name, content), as if each were a file.
pub fn load_sources<'a>(
    sources: impl IntoIterator<Item = (&'a str, &'a str)>,
    options: LoadOptions,
) -> Result<Loaded, LoadError> {
    let mut loader = Loader::default();
    for (name, text) in sources {
        loader.source(name, text);
    }
    loader.finish(options)
}

/// A convenience for tests and examples: loads one YAML text, failing on any error.
pub fn load_str(text: &str) -> Result<Loaded, LoadError> {
    load_sources([("<input>", text)], LoadOptions::default())
}

#[derive(Default)]
struct Loader {
    cluster: Cluster,
    errors: Vec<Diagnostic>,
    skipped: Vec<Diagnostic>,
    notices: Vec<Diagnostic>,
    seen: HashMap<(String, String, String), Origin>,
}

impl Loader {
    fn source(&mut self, name: &str, text: &str) {
        let file: Arc<str> = Arc::from(name);
        match yaml::parse_documents(text) {
            Err(e) => self.errors.push(Diagnostic {
                severity: Severity::Error,
                file,
                line: e.line,
                object: String::new(),
                field: String::new(),
                message: format!("YAML syntax error: {}", e.message),
            }),
            Ok(docs) => {
                for doc in docs {
                    let origin = Origin {
                        file: file.clone(),
                        line: doc.line,
                    };
                    self.document(&doc.value, &doc.lines, String::new(), origin);
                }
            }
        }
    }

    fn document(&mut self, value: &Value, lines: &LineMap, prefix: String, origin: Origin) {
        let mut ctx = Ctx::new(origin.clone(), lines, prefix.clone());
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
            self.errors.append(&mut ctx.diags);
            return;
        };
        if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
            let items = value
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                let p = if prefix.is_empty() {
                    format!("items[{i}]")
                } else {
                    format!("{prefix}.items[{i}]")
                };
                let line = lines.line_of(&p).unwrap_or(origin.line);
                self.document(
                    item,
                    lines,
                    p,
                    Origin {
                        file: origin.file.clone(),
                        line,
                    },
                );
            }
            return;
        }
        self.object(&mut ctx, api, kind, value, origin);
    }

    fn object(&mut self, ctx: &mut Ctx<'_>, api: &str, kind: &str, value: &Value, origin: Origin) {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        ctx.object = match value.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        let c = &mut self.cluster;
        let key = match (api, kind) {
            ("v1", "Namespace") => core::namespace(ctx, value, origin.clone()).map(|o| {
                let k = (o.name.clone(), String::new());
                c.namespaces.push(o);
                k
            }),
            ("v1", "Pod") => core::pod(ctx, value, origin.clone()).map(|o| {
                let k = (o.namespace.clone(), o.name.clone());
                c.pods.push(o);
                k
            }),
            ("v1", "Node") => core::node(ctx, value, origin.clone()).map(|o| {
                let k = (o.name.clone(), String::new());
                c.nodes.push(o);
                k
            }),
            ("networking.k8s.io/v1" | "extensions/v1beta1", "NetworkPolicy") => {
                let version = if api == "extensions/v1beta1" {
                    NetworkPolicyApi::ExtensionsV1beta1
                } else {
                    NetworkPolicyApi::V1
                };
                netpol::network_policy(ctx, value, version, origin.clone()).map(|o| {
                    let k = (o.namespace.clone(), o.name.clone());
                    c.network_policies.push(o);
                    k
                })
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
                admin::admin_policy(ctx, value, k, origin.clone()).map(|o| {
                    let key = (o.name.clone(), String::new());
                    c.admin_policies.push(o);
                    key
                })
            }
            (
                _,
                "Namespace"
                | "Pod"
                | "Node"
                | "NetworkPolicy"
                | "AdminNetworkPolicy"
                | "BaselineAdminNetworkPolicy"
                | "ClusterNetworkPolicy",
            ) => {
                // A policy we cannot read must not vanish silently: that would fail open.
                ctx.error("apiVersion", format!("Unsupported value: {api:?}: Palisade does not read {kind} in this API version"));
                None
            }
            _ => {
                ctx.notice(
                    "kind",
                    format!("{api} {kind} is not a kind Palisade reads; skipped"),
                );
                None
            }
        };
        if ctx.has_errors() {
            self.drop_last(kind, api);
            self.errors.append(&mut ctx.diags);
            return;
        }
        self.notices.append(&mut ctx.diags);
        if let Some((a, b)) = key {
            let id = (kind.to_string(), a, b);
            if let Some(first) = self.seen.get(&id) {
                ctx.error(
                    "metadata.name",
                    format!(
                        "Duplicate value: {kind} already defined at {}:{}",
                        first.file, first.line
                    ),
                );
                self.drop_last(kind, api);
                self.errors.append(&mut ctx.diags);
            } else {
                self.seen.insert(id, origin);
            }
        }
    }

    /// Removes the object just pushed for `kind` (it turned out invalid or duplicate).
    fn drop_last(&mut self, kind: &str, api: &str) {
        let c = &mut self.cluster;
        let _ = api;
        match kind {
            "Namespace" => drop(c.namespaces.pop()),
            "Pod" => drop(c.pods.pop()),
            "Node" => drop(c.nodes.pop()),
            "NetworkPolicy" => drop(c.network_policies.pop()),
            _ => drop(c.admin_policies.pop()),
        }
    }

    fn finish(mut self, options: LoadOptions) -> Result<Loaded, LoadError> {
        if !self.errors.is_empty() && !options.skip_invalid {
            self.errors
                .sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
            return Err(LoadError::Invalid(self.errors));
        }
        self.skipped = std::mem::take(&mut self.errors);
        self.imply_namespaces();
        let c = &mut self.cluster;
        c.namespaces.sort_by(|a, b| a.name.cmp(&b.name));
        c.pods
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        c.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        c.network_policies
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        c.admin_policies
            .sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
        let mut diagnostics = self.skipped;
        diagnostics.append(&mut self.notices);
        Ok(Loaded {
            cluster: self.cluster,
            diagnostics,
        })
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
            c.namespaces.push(core::implied_namespace(&ns));
        }
    }
}
