//! Phase 1 of an apply: the groups and address groups a plan creates, made idempotently.
//!
//! Neutron refuses tags in a group's `POST`, so a group is made, then tagged. A creation
//! whose answer is lost (a server error, a broken connection) may have made the groups:
//! it is not repeated blindly. The project's untagged groups are searched first
//! ([`untagged_groups`]) for a group with the name and creation description the plan
//! would give it; one found is adopted (tagged, its rules brought to the plan's), other
//! copies deleted, and only what is missing is created. Address groups are found again
//! the same way, among the project's address groups.

use std::collections::BTreeMap;

use palisade_neutron::SgRule;
use serde_json::{Value, json};

use super::{GROUPS_PER_CALL, Run};
use crate::client::retryable;
use crate::plan::{NewAddressGroup, NewGroup, Plan, key};
use crate::state::{Group, parse_group, query_escape, untagged_groups};

impl Run<'_> {
    /// Phase 1: adopt the groups of an earlier sync; bulk-create the groups (finding again
    /// those an earlier attempt made), tag them, drop unwanted default rules, then
    /// bulk-create their rules.
    pub(super) fn create_groups(&mut self, plan: &Plan) -> bool {
        for a in &plan.adopt_groups {
            let path = format!(
                "security-groups/{}/tags/{}",
                query_escape(&a.id),
                query_escape(&a.tag)
            );
            match self.client.put(&path, &Value::Null) {
                Ok(_) => self.done.groups_adopted += 1,
                Err(e) => self.fail(e),
            }
        }
        for g in &plan.create_address_groups {
            if !self.create_address_group(g) {
                return false;
            }
        }
        // The rules each group holds once made (Neutron's defaults, or a found group's).
        let mut present: BTreeMap<String, Vec<(String, SgRule)>> = BTreeMap::new();
        let mut pending: Vec<&NewGroup> = plan.create_groups.iter().collect();
        if !pending.is_empty() && !self.find_again(&mut pending, &mut present) {
            return false;
        }
        let chunks: Vec<Vec<&NewGroup>> = pending
            .chunks(GROUPS_PER_CALL)
            .map(<[&NewGroup]>::to_vec)
            .collect();
        for mut chunk in chunks {
            if !self.create_chunk_of_groups(&mut chunk, &mut present) {
                return false;
            }
        }
        for g in &plan.create_groups {
            let Some(id) = self.ids.get(&g.name).cloned() else {
                self.done.errors.push(format!(
                    "POST security-groups: group {} missing from the answer",
                    g.name
                ));
                continue;
            };
            if let Err(e) = self.client.put(
                &format!("security-groups/{id}/tags"),
                &json!({"tags": g.tags}),
            ) {
                self.fail(e);
            }
        }
        if !self.done.errors.is_empty() {
            return false;
        }
        let mut rules = Vec::new();
        for g in &plan.create_groups {
            let Some(id) = self.ids.get(&g.name).cloned() else {
                continue;
            };
            let mut kept = Vec::new();
            for (rule_id, rule) in present.remove(&g.name).unwrap_or_default() {
                let wanted = g
                    .rules
                    .iter()
                    .any(|r| key(r, |n| Some(n.to_string())).as_ref() == Some(&rule));
                if wanted && !kept.contains(&rule) {
                    kept.push(rule);
                } else {
                    self.delete_rule(&rule_id);
                }
            }
            for r in &g.rules {
                if !key(r, |n| Some(n.to_string())).is_some_and(|k| kept.contains(&k)) {
                    rules.push((id.clone(), r.clone()));
                }
            }
        }
        self.create_rules(&rules);
        self.done.errors.is_empty()
    }

    /// Creates one bulk of groups; a call that fails in a way that may have made them
    /// (a server or connection error) looks them up before trying again.
    fn create_chunk_of_groups(
        &mut self,
        chunk: &mut Vec<&NewGroup>,
        present: &mut BTreeMap<String, Vec<(String, SgRule)>>,
    ) -> bool {
        let retry = self.client.retry();
        let mut backoff = retry.first_backoff;
        for attempt in 1..=retry.attempts.max(1) {
            if chunk.is_empty() {
                return true;
            }
            let body: Vec<Value> = chunk
                .iter()
                .map(|g| json!({"name": g.name, "description": g.description}))
                .collect();
            match self
                .client
                .post_once("security-groups", &json!({"security_groups": body}))
            {
                Ok(created) => {
                    for g in created["security_groups"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(parse_group)
                    {
                        self.made(g, present);
                    }
                    return true;
                }
                Err(e) if retryable(&e) && attempt < retry.attempts => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(retry.max_backoff);
                    if !self.find_again(chunk, present) {
                        return false;
                    }
                }
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        true
    }

    /// Finds the groups of `pending` an earlier attempt made (untagged, in the project,
    /// with the name and creation description): keeps the first by id, deletes the other
    /// copies, and takes them out of `pending`.
    fn find_again(
        &mut self,
        pending: &mut Vec<&NewGroup>,
        present: &mut BTreeMap<String, Vec<(String, SgRule)>>,
    ) -> bool {
        let untagged = match untagged_groups(self.client, self.client.project_id()) {
            Ok(u) => u,
            Err(e) => {
                self.fail(e);
                return false;
            }
        };
        let mut copies: BTreeMap<(&str, &str), Vec<Group>> = BTreeMap::new();
        for g in untagged {
            if let Some(p) = pending
                .iter()
                .find(|p| p.name == g.name && p.description == g.description)
            {
                copies
                    .entry((p.name.as_str(), p.description.as_str()))
                    .or_default()
                    .push(g);
            }
        }
        for (_, mut found) in copies {
            found.sort_by(|a, b| a.id.cmp(&b.id));
            for extra in found.split_off(1) {
                match self.client.delete(&format!("security-groups/{}", extra.id)) {
                    Ok(()) => self.done.groups_deleted += 1,
                    Err(e) if e.status() == Some(404) => {}
                    Err(e) => self.fail(e),
                }
            }
            if let Some(g) = found.pop() {
                self.made(g, present);
            }
        }
        pending.retain(|p| !self.ids.contains_key(&p.name));
        self.done.errors.is_empty()
    }

    /// Creates an address group; a call that fails in a way that may have made it looks
    /// it up (the cluster's, by name and description) before trying again.
    fn create_address_group(&mut self, g: &NewAddressGroup) -> bool {
        let retry = self.client.retry();
        let mut backoff = retry.first_backoff;
        let body = json!({"address_group": {"name": g.name, "description": g.description,
            "addresses": g.addresses.iter().map(ToString::to_string).collect::<Vec<_>>()}});
        for attempt in 1..=retry.attempts.max(1) {
            match self.client.post_once("address-groups", &body) {
                Ok(made) => {
                    let Some(id) = made["address_group"]["id"].as_str() else {
                        self.done.errors.push(format!(
                            "POST address-groups: no id for {} in the answer",
                            g.name
                        ));
                        return false;
                    };
                    self.done.groups_created += 1;
                    self.ids.insert(g.name.clone(), id.to_string());
                    return true;
                }
                Err(e) if retryable(&e) && attempt < retry.attempts => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(retry.max_backoff);
                    let path = format!(
                        "address-groups?fields=id&fields=name&fields=description&project_id={}",
                        query_escape(self.client.project_id())
                    );
                    match self.client.get(&path) {
                        Ok(v) => {
                            let found = v["address_groups"].as_array().and_then(|a| {
                                a.iter()
                                    .filter(|x| {
                                        x["name"] == g.name && x["description"] == g.description
                                    })
                                    .filter_map(|x| x["id"].as_str())
                                    .min()
                            });
                            if let Some(id) = found {
                                self.done.groups_created += 1;
                                self.ids.insert(g.name.clone(), id.to_string());
                                // Made with its addresses in one call: nothing more to do.
                                return true;
                            }
                        }
                        Err(e) => {
                            self.fail(e);
                            return false;
                        }
                    }
                }
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        true
    }

    /// Records a group made for the plan, with the rules it holds.
    fn made(&mut self, g: Group, present: &mut BTreeMap<String, Vec<(String, SgRule)>>) {
        self.done.groups_created += 1;
        let rules = g
            .rules
            .iter()
            .filter_map(|r| Some((r.id.clone(), r.rule.clone()?)))
            .collect();
        present.insert(g.name.clone(), rules);
        self.ids.insert(g.name, g.id);
    }
}
