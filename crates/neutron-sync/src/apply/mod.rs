//! Carries out a [`Plan`] in its order, and describes the calls it would make (`--dry-run`).
//!
//! Every refusal is an error: a `409` counts as done only when Neutron says the rule
//! already exists (an over-quota `409` is reported with the quota's numbers). Groups and
//! address groups are created idempotently (the `create` module): a creation whose answer is lost
//! is looked up before it is tried again.
//!
//! The order keeps every intermediate state safe: new groups are complete before any port
//! carries them; rules leave existing groups before ports move; each port first drops the
//! groups it loses (never carrying more than before), then takes the groups it gains; only
//! then do existing groups gain rules, and unwanted groups go last. A phase that fails
//! stops the sync after that phase (its independent items are still tried), so a failure
//! before the ports move leaves every port at least as strict as before.

pub(crate) mod create;

use std::collections::{BTreeMap, HashMap};

use palisade_neutron::{Remote, SgRule};
use serde::Serialize;
use serde_json::{Value, json};

use crate::client::{ApiError, Client};
use crate::plan::{AddressChange, GroupRef, NewGroup, Plan, PortUpdate, default_rules, key};
use crate::state::rule_body;

/// Groups per bulk `POST /security-groups`.
pub const GROUPS_PER_CALL: usize = 100;
/// Rules per bulk `POST /security-group-rules` (well under Neutron's request size limits).
pub const RULES_PER_CALL: usize = 300;

/// One call, as `--dry-run` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedCall {
    /// `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// The path under `/v2.0/` (a group still to be created appears as `<new NAME>`).
    pub path: String,
    /// What it does.
    pub what: String,
}

/// How many of a new group's rules are Neutron's default ones (kept), and how many the
/// sync creates.
pub fn planned_rule_creations(g: &NewGroup) -> (usize, usize) {
    let keys: Vec<SgRule> = g
        .rules
        .iter()
        .filter_map(|r| key(r, |n| Some(n.to_string())))
        .collect();
    let kept = default_rules().iter().filter(|d| keys.contains(d)).count();
    (kept, g.rules.len() - kept)
}

/// The write calls a plan makes, in order. New groups are assumed to come with Neutron's
/// two default egress rules.
pub fn planned_calls(plan: &Plan) -> Vec<PlannedCall> {
    let mut out = Vec::new();
    let call = |method, path: String, what: String| PlannedCall { method, path, what };
    for a in &plan.adopt_groups {
        out.push(call(
            "PUT",
            format!("security-groups/{}/tags/{}", a.id, a.tag),
            format!("adopt group {}", a.name),
        ));
    }
    for g in &plan.create_address_groups {
        out.push(call(
            "POST",
            "address-groups".into(),
            format!(
                "create address group {} ({} address(es))",
                g.name,
                g.addresses.len()
            ),
        ));
    }
    for chunk in plan.create_groups.chunks(GROUPS_PER_CALL) {
        let names: Vec<&str> = chunk.iter().map(|g| g.name.as_str()).collect();
        out.push(call(
            "POST",
            "security-groups".into(),
            format!("create {} group(s): {}", chunk.len(), names.join(", ")),
        ));
    }
    for g in &plan.create_groups {
        out.push(call(
            "PUT",
            format!("security-groups/<new {}>/tags", g.name),
            format!("tag {}", g.tags.join(",")),
        ));
    }
    for g in &plan.create_groups {
        let keys: Vec<SgRule> = g
            .rules
            .iter()
            .filter_map(|r| key(r, |n| Some(n.to_string())))
            .collect();
        let (_, rules) = planned_rule_creations(g);
        for d in default_rules() {
            if !keys.contains(&d) {
                out.push(call(
                    "DELETE",
                    format!(
                        "security-group-rules/<default egress {:?} of {}>",
                        d.ethertype, g.name
                    ),
                    "remove a default rule".into(),
                ));
            }
        }
        for chunk in 0..rules.div_ceil(RULES_PER_CALL) {
            let size = (rules - chunk * RULES_PER_CALL).min(RULES_PER_CALL);
            out.push(call(
                "POST",
                "security-group-rules".into(),
                format!("create {size} rule(s) in {}", g.name),
            ));
        }
    }
    for d in &plan.delete_rules {
        out.push(call(
            "DELETE",
            format!("security-group-rules/{}", d.id),
            format!("remove a rule of {}", d.group),
        ));
    }
    for c in &plan.remove_addresses {
        out.push(call(
            "PUT",
            format!("address-groups/{}/remove_addresses", c.id),
            format!("{}: remove {} address(es)", c.name, c.addresses.len()),
        ));
    }
    for p in plan.tighten_ports.iter().chain(&plan.set_ports) {
        out.push(call("PUT", format!("ports/{}", p.port_id), port_what(p)));
    }
    let mut by_group: BTreeMap<&str, usize> = BTreeMap::new();
    for a in &plan.add_rules {
        *by_group.entry(&a.group).or_default() += 1;
    }
    for (group, n) in by_group {
        for chunk in 0..n.div_ceil(RULES_PER_CALL) {
            let size = (n - chunk * RULES_PER_CALL).min(RULES_PER_CALL);
            out.push(call(
                "POST",
                "security-group-rules".into(),
                format!("add {size} rule(s) to {group}"),
            ));
        }
    }
    for c in &plan.add_addresses {
        out.push(call(
            "PUT",
            format!("address-groups/{}/add_addresses", c.id),
            format!("{}: add {} address(es)", c.name, c.addresses.len()),
        ));
    }
    for g in &plan.delete_groups {
        out.push(call(
            "DELETE",
            format!("security-groups/{}", g.id),
            format!("delete group {}", g.name),
        ));
    }
    for g in &plan.delete_address_groups {
        out.push(call(
            "DELETE",
            format!("address-groups/{}", g.id),
            format!("delete address group {}", g.name),
        ));
    }
    out
}

fn port_what(p: &PortUpdate) -> String {
    let groups: Vec<String> = p.groups.iter().map(ToString::to_string).collect();
    format!(
        "{}: security_groups = [{}]",
        p.pod.as_deref().unwrap_or("no pod"),
        groups.join(", ")
    )
}

/// What an apply did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// Groups created (or found again after a lost answer).
    pub groups_created: usize,
    /// Groups of an earlier sync adopted (tagged).
    pub groups_adopted: usize,
    /// Groups deleted.
    pub groups_deleted: usize,
    /// Rules created.
    pub rules_created: usize,
    /// Rules deleted (default rules of new groups included).
    pub rules_deleted: usize,
    /// Port updates.
    pub ports_updated: usize,
    /// Address group updates (addresses added or removed).
    pub address_changes: usize,
    /// Calls that failed (the sync stopped after the phase of the first).
    pub errors: Vec<String>,
}

/// Applies `plan` through `client`.
pub fn apply(client: &Client, plan: &Plan) -> Applied {
    let mut run = Run {
        client,
        done: Applied::default(),
        ids: plan.known_groups.clone().into_iter().collect(),
    };
    // Each phase runs only if every earlier one succeeded.
    let _ = run.create_groups(plan)
        && run.phase(|r| {
            for d in &plan.delete_rules {
                r.delete_rule(&d.id);
            }
            for c in &plan.remove_addresses {
                r.change_addresses(c, "remove_addresses");
            }
        })
        && run.phase(|r| {
            for p in &plan.tighten_ports {
                r.update_port(p);
            }
        })
        && run.phase(|r| {
            for p in &plan.set_ports {
                r.update_port(p);
            }
        })
        && run.phase(|r| {
            let rules: Vec<(String, SgRule)> = plan
                .add_rules
                .iter()
                .map(|a| (a.group_id.clone(), a.rule.clone()))
                .collect();
            r.create_rules(&rules);
            for c in &plan.add_addresses {
                r.change_addresses(c, "add_addresses");
            }
        })
        && run.phase(|r| {
            for g in &plan.delete_groups {
                match r.client.delete(&format!("security-groups/{}", g.id)) {
                    Ok(()) => r.done.groups_deleted += 1,
                    Err(e) if e.status() == Some(404) => {}
                    Err(e) => r.fail(e),
                }
            }
            for g in &plan.delete_address_groups {
                match r.client.delete(&format!("address-groups/{}", g.id)) {
                    Ok(()) => r.done.groups_deleted += 1,
                    Err(e) if e.status() == Some(404) => {}
                    Err(e) => r.fail(e),
                }
            }
        });
    run.done
}

struct Run<'c> {
    client: &'c Client,
    done: Applied,
    /// Ids of the wanted groups, by name (those created by this run as they are).
    ids: HashMap<String, String>,
}

impl Run<'_> {
    /// Runs one phase; whether it (and everything before it) succeeded.
    fn phase(&mut self, f: impl FnOnce(&mut Self)) -> bool {
        f(self);
        self.done.errors.is_empty()
    }

    /// Records a failed call; a refusal for being over quota gets the quota's numbers.
    fn fail(&mut self, e: ApiError) {
        let mut message = e.to_string();
        if let Some(resource) = over_quota(&e) {
            match crate::quota::usage(self.client, resource) {
                Ok(u) => message.push_str(&format!(
                    " ({resource}: quota {}, used {}; raise the quota)",
                    u.limit, u.used
                )),
                Err(read) => message.push_str(&format!(" (the quota could not be read: {read})")),
            }
        }
        self.done.errors.push(message);
    }

    /// A group reference as an id, when it can be resolved.
    fn resolve(&self, g: &GroupRef) -> Option<String> {
        match g {
            GroupRef::Id(id) => Some(id.clone()),
            GroupRef::New(name) => self.ids.get(name).cloned(),
        }
    }

    /// Adds addresses to an address group, or removes them (`which`: `add_addresses` or
    /// `remove_addresses`).
    fn change_addresses(&mut self, c: &AddressChange, which: &str) {
        let addresses: Vec<String> = c.addresses.iter().map(ToString::to_string).collect();
        match self.client.put(
            &format!("address-groups/{}/{which}", c.id),
            &json!({"addresses": addresses}),
        ) {
            Ok(_) => self.done.address_changes += 1,
            Err(e) => self.fail(e),
        }
    }

    fn delete_rule(&mut self, id: &str) {
        match self.client.delete(&format!("security-group-rules/{id}")) {
            Ok(()) => self.done.rules_deleted += 1,
            Err(e) if e.status() == Some(404) => {}
            Err(e) => self.fail(e),
        }
    }

    /// The body of a rule of group `group_id`, its remote group resolved to an id.
    fn body(&mut self, group_id: &str, rule: &SgRule) -> Option<Value> {
        let mut rule = rule.clone();
        if let Remote::Group(name) | Remote::AddressGroup(name) = &rule.remote {
            match self.ids.get(name).cloned() {
                Some(id) if matches!(rule.remote, Remote::Group(_)) => {
                    rule.remote = Remote::Group(id)
                }
                Some(id) => rule.remote = Remote::AddressGroup(id),
                None => {
                    self.done.errors.push(format!(
                        "rule of group {group_id}: remote group {name} has no id"
                    ));
                    return None;
                }
            }
        }
        Some(rule_body(group_id, &rule))
    }

    /// Creates rules in bulk, one group per call (Neutron's rule); a call Neutron refuses
    /// is retried rule by rule, where a rule that already exists counts as created and
    /// every other refusal is an error.
    fn create_rules(&mut self, rules: &[(String, SgRule)]) {
        let mut by_group: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        for (g, r) in rules {
            if let Some(body) = self.body(g, r) {
                by_group.entry(g).or_default().push(body);
            }
        }
        for bodies in by_group.values() {
            for chunk in bodies.chunks(RULES_PER_CALL) {
                self.create_chunk(chunk);
            }
        }
    }

    fn create_chunk(&mut self, chunk: &[Value]) {
        match self.client.post(
            "security-group-rules",
            &json!({"security_group_rules": chunk}),
        ) {
            Ok(_) => self.done.rules_created += chunk.len(),
            Err(e) if e.status().is_some_and(|s| (400..500).contains(&s)) => {
                for body in chunk {
                    match self.client.post(
                        "security-group-rules",
                        &json!({"security_group_rule": body}),
                    ) {
                        Ok(_) => self.done.rules_created += 1,
                        Err(e) if already_exists(&e) => {}
                        Err(e) => self.fail(e),
                    }
                }
            }
            Err(e) => self.fail(e),
        }
    }

    fn update_port(&mut self, p: &PortUpdate) {
        let ids: Option<Vec<String>> = p.groups.iter().map(|g| self.resolve(g)).collect();
        let Some(ids) = ids else {
            self.done.errors.push(format!(
                "port {}: a group it needs was not created",
                p.port_id
            ));
            return;
        };
        match self.client.put(
            &format!("ports/{}", p.port_id),
            &json!({"port": {"security_groups": ids}}),
        ) {
            Ok(_) => self.done.ports_updated += 1,
            Err(e) => self.fail(e),
        }
    }
}

/// Whether Neutron refused a rule because the same rule exists (`409`, "Security group
/// rule already exists"), the one refusal that means the work is done.
fn already_exists(e: &ApiError) -> bool {
    matches!(e, ApiError::Status { status: 409, message, .. } if message.contains("already exists"))
}

/// The resource a refusal for being over quota names (`409`, "Quota exceeded for
/// resources: ['security_group_rule']").
fn over_quota(e: &ApiError) -> Option<&'static str> {
    let ApiError::Status {
        status: 409,
        message,
        ..
    } = e
    else {
        return None;
    };
    if !message.contains("Quota exceeded") {
        return None;
    }
    ["security_group_rule", "security_group", "port"]
        .into_iter()
        .find(|r| message.contains(&format!("'{r}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16, message: &str) -> ApiError {
        ApiError::Status {
            method: "POST",
            path: "security-group-rules".into(),
            status,
            message: message.into(),
        }
    }

    #[test]
    fn only_an_existing_rule_is_a_refusal_that_counts_as_done() {
        let rows = [
            (
                status(409, "Security group rule already exists. Rule id is r."),
                true,
                None,
                "the rule exists",
            ),
            (
                status(
                    409,
                    "Quota exceeded for resources: ['security_group_rule'].",
                ),
                false,
                Some("security_group_rule"),
                "over quota",
            ),
            (status(403, "not allowed"), false, None, "forbidden"),
            (
                status(409, "Quota exceeded for resources: ['security_group']."),
                false,
                Some("security_group"),
                "group quota",
            ),
        ];
        for (e, exists, quota, why) in rows {
            assert_eq!(already_exists(&e), exists, "{why}");
            assert_eq!(over_quota(&e), quota, "{why}");
        }
    }
}
