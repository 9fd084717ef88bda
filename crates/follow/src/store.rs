//! The objects in force, kept from the sources' texts, and the engine changes that follow
//! from each event.
//!
//! Fail-closed rules (never fail open): an object that turns invalid keeps its last valid
//! version in force; a new invalid policy whose subject can be read is replaced by its
//! [`StandIn`] (isolation of that subject in the directions it names); a text with any
//! error (a YAML syntax error, a typo in a kind or a name) or that cannot be read at all
//! ([`Event::Unreadable`]) keeps everything it held in force: only a well-formed text that
//! no longer defines an object, or the text's removal, removes it.
//! Every invalid object is reported ([`Store::problems`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use palisade_model::{Change, Object, ObjectKey, SharedChange};
use palisade_model::{Diagnostic, Kind, Namespace, PolicyKind, Severity, StandIn};

use crate::source::{Event, Text};

/// Which engines a change is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The enforced state (and the staged view, which includes it).
    Enforced,
    /// Only the staged view (enforced plus staged policies).
    Staged,
}

/// One text's version of an object.
#[derive(Debug, Clone)]
struct Claim {
    text: String,
    object: Arc<Object>,
}

/// The objects in force, by the texts that hold them.
#[derive(Debug, Default)]
pub struct Store {
    /// The keys each text holds.
    texts: HashMap<String, BTreeSet<ObjectKey>>,
    /// Every text's version of each key; the first claim is in force, later ones wait
    /// (a policy moved from one file to another is never absent in between).
    claims: HashMap<ObjectKey, Vec<Claim>>,
    /// What the engines were last given, per key.
    applied: HashMap<ObjectKey, Arc<Object>>,
    /// The namespaces the engines hold and whether each was declared (or implied).
    namespaces: BTreeMap<String, Namespace>,
    /// Pods and NetworkPolicies in force per namespace (keeps implied namespaces alive).
    users: HashMap<String, usize>,
    /// Errors per text: invalid objects (kept or stood in for) and unreadable text.
    problems: BTreeMap<String, Vec<Diagnostic>>,
    /// How many invalid policies each text has in force as stand-ins.
    stand_ins: HashMap<String, usize>,
}

impl Store {
    /// Applies one source event, returning the engine changes it implies, in order.
    pub fn handle(&mut self, event: Event) -> Vec<(SharedChange, Scope)> {
        let touched = match event {
            Event::Put(texts) => self.put(texts),
            Event::Remove(ids) => ids.iter().flat_map(|id| self.drop_text(id)).collect(),
            Event::Replace { prefix, texts } => {
                let listed: BTreeSet<&str> = texts.iter().map(|t| t.id.as_str()).collect();
                let gone: Vec<String> = self
                    .texts
                    .keys()
                    .filter(|id| id.starts_with(&prefix) && !listed.contains(id.as_str()))
                    .cloned()
                    .collect();
                let mut touched: BTreeSet<ObjectKey> =
                    gone.iter().flat_map(|id| self.drop_text(id)).collect();
                touched.extend(self.put(texts));
                touched
            }
            Event::Unreadable { id, reason } => {
                // What the text held stays in force; the reason is reported (the source
                // logged it).
                self.problems
                    .insert(id.clone(), vec![unreadable(&id, reason)]);
                BTreeSet::new()
            }
            Event::Synced | Event::Health { .. } => BTreeSet::new(),
        };
        self.changes(touched)
    }

    /// Every object in force, as one cluster (the staged policies apart).
    pub fn cluster(&self) -> palisade_model::Cluster {
        let mut c = palisade_model::Cluster::default();
        // Namespaces apart: the engines hold the declared and the implied ones.
        for (key, object) in self
            .applied
            .iter()
            .filter(|(k, _)| k.kind != Kind::Namespace)
        {
            c.push(Object::clone(object), key.staged);
        }
        c.namespaces = self.namespaces.values().cloned().collect();
        c.sort();
        c
    }

    /// Objects in force by kind.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for key in self.applied.keys().filter(|k| k.kind != Kind::Namespace) {
            *out.entry(key.kind.as_str()).or_default() += 1;
        }
        // Declared and implied alike: the namespaces the engine holds.
        out.insert("Namespace", self.namespaces.len());
        out
    }

    /// The current errors, by text.
    pub fn problems(&self) -> &BTreeMap<String, Vec<Diagnostic>> {
        &self.problems
    }

    /// How many invalid policies are enforced as their fail-closed stand-ins.
    pub fn stand_ins(&self) -> usize {
        self.stand_ins.values().sum()
    }

    /// The enforced admin policies in force: kind, name, the first error of the text that
    /// holds the current version (when that version is invalid and an earlier one or a
    /// stand-in is in force instead), and the object in force.
    pub fn enforced_admin(
        &self,
    ) -> impl Iterator<Item = (PolicyKind, &str, Option<&Diagnostic>, &Arc<Object>)> {
        self.claims.iter().filter_map(|(key, claims)| {
            let kind = key.kind.policy_kind()?;
            if key.staged || key.kind == Kind::NetworkPolicy {
                return None;
            }
            let problem = claims
                .first()
                .and_then(|claim| self.problems.get(&claim.text))
                .and_then(|diags| diags.iter().find(|d| d.severity == Severity::Error));
            let version = self.applied.get(key)?;
            Some((kind, key.name.as_str(), problem, version))
        })
    }

    /// Whether any policy is staged.
    pub fn has_staged(&self) -> bool {
        self.applied.keys().any(|k| k.staged)
    }

    /// Decodes the texts and records what each now holds; returns the keys touched.
    fn put(&mut self, mut texts: Vec<Text>) -> BTreeSet<ObjectKey> {
        if texts.is_empty() {
            return BTreeSet::new();
        }
        let decoded = palisade_model::decode_bodies(
            (texts.iter_mut()).map(|t| (t.id.as_str(), t.body.take_body())),
        );
        let mut held: HashMap<&str, BTreeMap<ObjectKey, Arc<Object>>> = texts
            .iter()
            .map(|t| (t.id.as_str(), BTreeMap::new()))
            .collect();
        let valid = decoded.cluster.into_objects();
        for (object, staged) in valid {
            let file = object.origin().map(|o| o.file.clone()).unwrap_or_default();
            if let Some(h) = held.get_mut(&*file) {
                h.insert(object.key(staged), Arc::new(object));
            }
        }
        // Errors per text; a text with an error that names no object could not be read.
        let mut problems: HashMap<&str, Vec<Diagnostic>> = HashMap::new();
        for d in decoded.diagnostics {
            if d.severity == Severity::Error
                && let Some((&id, _)) = held.get_key_value(&*d.file)
            {
                problems.entry(id).or_default().push(d);
            }
        }
        // A text with any error is not a well-formed removal of what it no longer defines
        // (a typo in a kind or a name, a syntax error): what it held stays in force.
        let keep_previous: BTreeSet<&str> = problems.keys().copied().collect();
        let mut stand_ins: HashMap<String, usize> = HashMap::new();
        for invalid in decoded.invalid {
            let Some(h) = held.get_mut(&*invalid.origin.file) else {
                continue;
            };
            let id = &*invalid.origin.file;
            let key = invalid.key();
            // A staged policy that turns invalid stays staged in its last valid version.
            let previous = key.as_ref().and_then(|k| {
                self.claim_of(id, k).map(|o| (k.clone(), o)).or_else(|| {
                    self.claim_of(id, &k.as_staged())
                        .map(|o| (k.as_staged(), o))
                })
            });
            match (key, previous, invalid.stand_in) {
                (_, Some((key, last_valid)), _) => {
                    tracing::warn!(text = id, object = %key, "invalid; its last valid version stays in force");
                    h.insert(key, last_valid);
                }
                (Some(key), None, Some(stand_in)) => {
                    tracing::warn!(text = id, object = %key, "invalid new policy; its subject is isolated until it is fixed");
                    h.insert(key, Arc::new(stand_in_object(stand_in)));
                    *stand_ins.entry(id.to_string()).or_default() += 1;
                }
                (key, None, _) => {
                    tracing::warn!(
                        text = id,
                        object = %key.map(|k| k.to_string()).unwrap_or_default(),
                        "invalid new object; not enforced"
                    );
                }
            }
        }
        let mut touched = BTreeSet::new();
        for t in &texts {
            let mut new = held.remove(t.id.as_str()).unwrap_or_default();
            if keep_previous.contains(t.id.as_str()) {
                // Keep everything the text held that it does not now define.
                for key in self.texts.get(&t.id).into_iter().flatten() {
                    if !new.contains_key(key)
                        && let Some(object) = self.claim_of(&t.id, key)
                    {
                        new.insert(key.clone(), object);
                    }
                }
            }
            touched.extend(self.set_text(&t.id, new));
            match stand_ins.remove(&t.id) {
                Some(n) => self.stand_ins.insert(t.id.clone(), n),
                None => self.stand_ins.remove(&t.id),
            };
            match problems.remove(t.id.as_str()) {
                Some(ds) => {
                    for d in &ds {
                        tracing::error!(%d, "invalid input");
                    }
                    self.problems.insert(t.id.clone(), ds);
                }
                None => {
                    self.problems.remove(&t.id);
                }
            }
        }
        touched
    }

    /// This text's current version of `key`.
    fn claim_of(&self, text: &str, key: &ObjectKey) -> Option<Arc<Object>> {
        self.claims
            .get(key)?
            .iter()
            .find(|c| c.text == text)
            .map(|c| c.object.clone())
    }

    /// Makes `objects` what text `id` holds; returns the keys touched.
    fn set_text(
        &mut self,
        id: &str,
        objects: BTreeMap<ObjectKey, Arc<Object>>,
    ) -> BTreeSet<ObjectKey> {
        let old = self.texts.remove(id).unwrap_or_default();
        let mut touched: BTreeSet<ObjectKey> = old
            .difference(&objects.keys().cloned().collect())
            .cloned()
            .collect();
        for key in &touched {
            self.unclaim(id, key);
        }
        for (key, object) in &objects {
            let claims = self.claims.entry(key.clone()).or_default();
            match claims.iter_mut().find(|c| c.text == id) {
                Some(c) => c.object = object.clone(),
                None => {
                    if let Some(first) = claims.first() {
                        tracing::error!(text = id, object = %key, defined_in = first.text, "defined twice; the first definition stays in force");
                    }
                    claims.push(Claim {
                        text: id.to_string(),
                        object: object.clone(),
                    });
                }
            }
            touched.insert(key.clone());
        }
        if !objects.is_empty() {
            self.texts
                .insert(id.to_string(), objects.into_keys().collect());
        }
        touched
    }

    fn unclaim(&mut self, id: &str, key: &ObjectKey) {
        if let Some(claims) = self.claims.get_mut(key) {
            claims.retain(|c| c.text != id);
            if claims.is_empty() {
                self.claims.remove(key);
            }
        }
    }

    /// Forgets a text; returns the keys touched.
    fn drop_text(&mut self, id: &str) -> BTreeSet<ObjectKey> {
        self.problems.remove(id);
        self.stand_ins.remove(id);
        self.set_text(id, BTreeMap::new())
    }

    /// The engine changes that bring the touched keys to what is now in force, with the
    /// namespaces they need first and the namespaces no longer needed last.
    fn changes(&mut self, touched: BTreeSet<ObjectKey>) -> Vec<(SharedChange, Scope)> {
        let mut out = Vec::new();
        let mut namespaces = BTreeSet::new();
        for key in touched {
            let now = self
                .claims
                .get(&key)
                .and_then(|c| c.first())
                .map(|c| c.object.clone());
            let before = self.applied.get(&key);
            if before == now.as_ref() {
                continue;
            }
            if key.kind == Kind::Namespace {
                namespaces.insert(key.name.clone());
            }
            if let Some(ns) = &key.namespace {
                namespaces.insert(ns.to_string());
                let users = self.users.entry(ns.to_string()).or_default();
                match (before.is_some(), now.is_some()) {
                    (false, true) => *users += 1,
                    (true, false) => *users = users.saturating_sub(1),
                    _ => {}
                }
            }
            let scope = if key.staged {
                Scope::Staged
            } else {
                Scope::Enforced
            };
            match now {
                Some(object) => {
                    self.applied.insert(key.clone(), object.clone());
                    if key.kind != Kind::Namespace {
                        out.push((Change::Upsert(object), scope));
                    }
                }
                None => {
                    self.applied.remove(&key);
                    if key.kind != Kind::Namespace {
                        out.push((Change::Remove(key), scope));
                    }
                }
            }
        }
        let mut first = Vec::new();
        let mut last = Vec::new();
        for name in namespaces {
            let declared = match self
                .applied
                .get(&ObjectKey::new(Kind::Namespace, None, &name))
                .map(|o| &**o)
            {
                Some(Object::Namespace(ns)) => Some(ns.clone()),
                _ => None,
            };
            let in_use = self.users.get(&name).is_some_and(|n| *n > 0);
            let want = declared.or_else(|| in_use.then(|| Namespace::implied(&name)));
            if want.as_ref() == self.namespaces.get(&name) {
                continue;
            }
            match want {
                Some(ns) => {
                    self.namespaces.insert(name, ns.clone());
                    let ns = Arc::new(Object::Namespace(ns));
                    first.push((Change::Upsert(ns), Scope::Enforced));
                }
                None => {
                    self.namespaces.remove(&name);
                    self.users.remove(&name);
                    let key = ObjectKey::new(Kind::Namespace, None, &name);
                    last.push((Change::Remove(key), Scope::Enforced));
                }
            }
        }
        first.extend(out);
        first.extend(last);
        first
    }
}

/// The error recorded for a text that cannot be read.
fn unreadable(id: &str, reason: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: id.into(),
        line: 1,
        object: String::new(),
        field: String::new(),
        message: format!("cannot read: {reason}; what it held stays in force"),
    }
}

fn stand_in_object(stand_in: StandIn) -> Object {
    match stand_in {
        StandIn::NetworkPolicy(np) => Object::NetworkPolicy(np),
        StandIn::Admin(p) => Object::Admin(p),
    }
}
