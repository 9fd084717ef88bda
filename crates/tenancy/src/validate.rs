//! Whole-configuration checks, after every item has been parsed: names unique where they
//! must be, and every reference (groups, tools, attached policies) resolves.

use std::collections::{BTreeSet, HashSet};

use palisade_model::Diagnostic;
use palisade_model::validate::dns_label;

use crate::compile::k8s_name;
use crate::config::{Config, Loc, Rule};

/// Appends every cross-item error of `config` to `errors`.
pub(crate) fn validate(config: &Config, errors: &mut Vec<Diagnostic>) {
    let mut v = Validator {
        config,
        errors,
        groups: BTreeSet::new(),
        tools: HashSet::new(),
    };
    v.groups();
    v.tools();
    v.policies();
    v.bases();
    v.attachments();
}

struct Validator<'c, 'e> {
    config: &'c Config,
    errors: &'e mut Vec<Diagnostic>,
    groups: BTreeSet<&'c str>,
    tools: HashSet<&'c str>,
}

impl Validator<'_, '_> {
    fn err(&mut self, loc: &Loc, field: &str, message: impl Into<String>) {
        self.errors.push(loc.error(field, message));
    }

    fn groups(&mut self) {
        for g in &self.config.groups {
            if !self.groups.insert(&g.value) {
                self.err(&g.loc, "", format!("duplicate group {:?}", g.value));
            }
        }
    }

    /// Tools are unique per group by their label value (`Web` and `web` collide).
    fn tools(&mut self) {
        let mut seen = HashSet::new();
        for t in &self.config.tools {
            let tool = &t.value;
            if !self.groups.contains(tool.group.as_str()) {
                self.err(
                    &t.loc,
                    "group",
                    format!("group {:?} does not exist", tool.group),
                );
            }
            let k = k8s_name(&tool.name);
            if !seen.insert((tool.group.as_str(), k.clone())) {
                self.err(
                    &t.loc,
                    "name",
                    format!(
                        "tool {:?} is not unique in group {:?} (as a Kubernetes name: {k:?})",
                        tool.name, tool.group
                    ),
                );
            }
            self.tools.insert(&tool.name);
        }
    }

    fn policies(&mut self) {
        let mut seen = HashSet::new();
        for p in &self.config.network_policies {
            let policy = &p.value;
            let k = k8s_name(&policy.name);
            if k.is_empty() || dns_label(&k).is_some() {
                self.err(
                    &p.loc,
                    "name",
                    format!(
                        "policy name {:?} does not make a valid Kubernetes name (got {k:?})",
                        policy.name
                    ),
                );
            }
            if policy.groups.is_empty() {
                self.err(
                    &p.loc,
                    "groups",
                    "a policy must belong to at least one group",
                );
            }
            for (i, g) in policy.groups.iter().enumerate() {
                if !self.groups.contains(g.as_str()) {
                    self.err(
                        &p.loc,
                        &format!("groups[{i}]"),
                        format!("group {g:?} does not exist"),
                    );
                }
                if !seen.insert((g.as_str(), k.clone())) {
                    self.err(
                        &p.loc,
                        "name",
                        format!("policy {:?} is not unique in group {g:?}", policy.name),
                    );
                }
            }
            self.rules(&p.loc, "ingress", &policy.ingress);
            self.rules(&p.loc, "egress", &policy.egress);
        }
    }

    fn bases(&mut self) {
        let mut seen = HashSet::new();
        for b in &self.config.base_network_policies {
            if !seen.insert(b.value.name.as_str()) {
                self.err(
                    &b.loc,
                    "name",
                    format!("base policy name {:?} is not unique", b.value.name),
                );
            }
            self.rules(&b.loc, "ingress", &b.value.ingress);
            self.rules(&b.loc, "egress", &b.value.egress);
        }
    }

    /// The groups and tools a rule names exist.
    fn rules(&mut self, loc: &Loc, dir: &str, rules: &Option<Vec<Rule>>) {
        for (i, r) in rules.iter().flatten().enumerate() {
            for (j, g) in r.allowed_groups.iter().enumerate() {
                if !self.groups.contains(g.as_str()) {
                    self.err(
                        loc,
                        &format!("{dir}[{i}].allowed_groups[{j}]"),
                        format!("group {g:?} does not exist"),
                    );
                }
            }
            for (j, t) in r.allowed_tools.iter().enumerate() {
                if !self.tools.contains(t.as_str()) {
                    self.err(
                        loc,
                        &format!("{dir}[{i}].allowed_tools[{j}]"),
                        format!("tool {t:?} does not exist"),
                    );
                }
            }
        }
    }

    /// "only policies in the same group as a tool can be added to that tool".
    fn attachments(&mut self) {
        let in_group: HashSet<(&str, &str)> = self
            .config
            .network_policies
            .iter()
            .flat_map(|p| {
                p.value
                    .groups
                    .iter()
                    .map(|g| (g.as_str(), p.value.name.as_str()))
            })
            .collect();
        for t in &self.config.tools {
            for (i, name) in t.value.network_policies.iter().enumerate() {
                if !in_group.contains(&(t.value.group.as_str(), name.as_str())) {
                    self.err(
                        &t.loc,
                        &format!("network_policies[{i}]"),
                        format!(
                            "policy {name:?} does not exist in group {:?}",
                            t.value.group
                        ),
                    );
                }
            }
        }
    }
}
