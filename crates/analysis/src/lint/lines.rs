//! The line of a finding's field and the lint-ignore annotation of its object, from what
//! the loaded objects keep of their text ([`Origin::fields`]). Findings name their object
//! by file and first line until [`ObjectLines::refine`] moves them to their field's line.

use std::collections::HashMap;

use palisade_model::{Cluster, FieldLines, Origin};

use super::Finding;

/// The field lines and lint-ignore annotations of the objects read, by where each starts.
#[derive(Debug, Default)]
pub struct ObjectLines<'a> {
    by_place: HashMap<(&'a str, usize), &'a FieldLines>,
}

impl<'a> ObjectLines<'a> {
    /// Those of every object of `cluster` that keeps them, and of the objects the loader
    /// set aside ([`palisade_model::Loaded::set_aside`]); the first object read at a place wins.
    pub fn new(cluster: &'a Cluster, set_aside: &'a [Origin]) -> ObjectLines<'a> {
        let c = cluster;
        let origins = c
            .network_policies
            .iter()
            .chain(&c.staged.network_policies)
            .map(|p| &p.origin)
            .chain(c.admin_policies.iter().map(|p| &p.origin))
            .chain(c.staged.admin_policies.iter().map(|p| &p.origin))
            .chain(c.services.iter().map(|s| &s.origin))
            .chain(c.pods.iter().map(|p| &p.origin))
            .chain(c.namespaces.iter().filter_map(|n| n.origin.as_ref()))
            .chain(c.nodes.iter().map(|n| &n.origin))
            .chain(c.endpoint_slices.iter().map(|e| &e.origin))
            .chain(set_aside);
        let mut by_place = HashMap::new();
        for origin in origins {
            if let Some(fields) = &origin.fields {
                by_place
                    .entry((&*origin.file, origin.line))
                    .or_insert(&**fields);
            }
        }
        ObjectLines { by_place }
    }

    /// The lint-ignore annotation of the object read at `file`:`line`, if it has one.
    pub fn ignore_of(&self, file: &str, line: usize) -> Option<&'a str> {
        self.by_place.get(&(file, line))?.lint_ignore.as_deref()
    }

    /// Every lint-ignore annotation: (file, object line, value).
    pub fn ignores(&self) -> impl Iterator<Item = (&'a str, usize, &'a str)> + '_ {
        self.by_place
            .iter()
            .filter_map(|(&(file, line), f)| Some((file, line, f.lint_ignore.as_deref()?)))
    }

    /// Moves each finding's line from its object's first line to its field's line.
    pub fn refine(&self, findings: &mut [Finding]) {
        for f in findings.iter_mut().filter(|f| !f.field.is_empty()) {
            let Some(file) = &f.file else { continue };
            let Some(fields) = self.by_place.get(&(file.as_str(), f.line)) else {
                continue;
            };
            if let Some(line) = fields.lines.line_of(&f.field) {
                f.line = line;
            }
        }
    }
}
