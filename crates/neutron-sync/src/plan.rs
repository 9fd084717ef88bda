//! The calls that bring Neutron from what it holds ([`Observed`]) to the translation: a
//! pure function, so `--dry-run` prints exactly what an apply would do.
//!
//! Minimal by construction: groups are matched by name among the owned ones, rules by
//! value (rules are immutable, so a changed rule is one deletion and one creation), ports
//! by fixed IP; nothing equal is touched, so a second sync writes nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use palisade_neutron::{Ethertype, Remote, RuleDirection, SgRule, Traffic, Translation};
use serde::Serialize;

use crate::state::{Group, OWNED_TAG, Observed, truncate};

/// A group the plan names: one Neutron has (by id), or one the plan creates (by name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum GroupRef {
    /// An existing group's id.
    Id(String),
    /// The name of a group this plan creates.
    New(String),
}

impl std::fmt::Display for GroupRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupRef::Id(id) => f.write_str(id),
            GroupRef::New(name) => write!(f, "<new {name}>"),
        }
    }
}

/// A group to create, with its rules (remote groups by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewGroup {
    /// Name.
    pub name: String,
    /// Description (at most 255 characters).
    pub description: String,
    /// Tags: [`OWNED_TAG`] and the translation's.
    pub tags: Vec<String>,
    /// Rules.
    pub rules: Vec<SgRule>,
}

/// A rule to add to an existing group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleAdd {
    /// The group's id.
    pub group_id: String,
    /// The group's name.
    pub group: String,
    /// The rule (a remote group by name).
    pub rule: SgRule,
}

/// A rule to delete from an owned group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuleDelete {
    /// The rule's id.
    pub id: String,
    /// The group's name.
    pub group: String,
}

/// A port's new, exact set of groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortUpdate {
    /// The port's id.
    pub port_id: String,
    /// The pod it belongs to (`namespace/name`), if any.
    pub pod: Option<String>,
    /// The groups it carries afterwards.
    pub groups: Vec<GroupRef>,
}

/// A group to delete.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupDelete {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
}

/// A pod whose port could not be identified (reported, never guessed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unmatched {
    /// `namespace/name`.
    pub pod: String,
    /// Why.
    pub reason: String,
}

/// Everything a sync changes, in the order it is applied (see `docs/neutron.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// 1. Groups to create, each with its rules (nothing carries them yet).
    pub create_groups: Vec<NewGroup>,
    /// 2. Rules to remove from owned groups (only ever stricter).
    pub delete_rules: Vec<RuleDelete>,
    /// 3. Ports moved to the groups they keep: what they carry now and will carry after
    ///    (only ever stricter).
    pub tighten_ports: Vec<PortUpdate>,
    /// 4. Ports given their exact new groups.
    pub set_ports: Vec<PortUpdate>,
    /// 5. Rules to add to existing groups.
    pub add_rules: Vec<RuleAdd>,
    /// 6. Owned groups nothing wants any more (no port carries them now).
    pub delete_groups: Vec<GroupDelete>,
    /// Pods whose port was not found or not unique: left as they are.
    pub unmatched: Vec<Unmatched>,
    /// The ids of the wanted groups Neutron already has, by name (rules name remote
    /// groups by name).
    pub known_groups: BTreeMap<String, String>,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.create_groups.is_empty()
            && self.delete_rules.is_empty()
            && self.tighten_ports.is_empty()
            && self.set_ports.is_empty()
            && self.add_rules.is_empty()
            && self.delete_groups.is_empty()
    }
}

/// The rules Neutron gives every new group, which the plan removes unless wanted.
pub fn default_rules() -> [SgRule; 2] {
    [Ethertype::IPv4, Ethertype::IPv6].map(|ethertype| SgRule {
        direction: RuleDirection::Egress,
        ethertype,
        traffic: Traffic::Any,
        remote: Remote::Any,
        description: String::new(),
    })
}

/// A rule without its description, its remote group named by `rename`.
pub fn key(rule: &SgRule, rename: impl Fn(&str) -> Option<String>) -> Option<SgRule> {
    let remote = match &rule.remote {
        Remote::Group(g) => Remote::Group(rename(g)?),
        other => other.clone(),
    };
    Some(SgRule {
        remote,
        description: String::new(),
        ..rule.clone()
    })
}

/// Plans the calls from `observed` to `desired`.
pub fn plan(desired: &Translation, observed: &Observed) -> Plan {
    let mut out = Plan::default();
    // The owned groups by name; a name held twice (an interrupted earlier run) keeps the
    // first by id and deletes the others.
    let mut owned: BTreeMap<&str, Vec<&Group>> = BTreeMap::new();
    for g in observed.groups.iter().filter(|g| g.owned()) {
        owned.entry(&g.name).or_default().push(g);
    }
    let mut chosen: BTreeMap<&str, &Group> = BTreeMap::new();
    for (name, mut groups) in owned {
        groups.sort_by(|a, b| a.id.cmp(&b.id));
        chosen.insert(name, groups[0]);
        for extra in &groups[1..] {
            out.delete_groups.push(GroupDelete {
                id: extra.id.clone(),
                name: extra.name.clone(),
            });
        }
    }
    let wanted: BTreeSet<&str> = desired
        .security_groups
        .iter()
        .map(|g| g.name.as_str())
        .collect();
    let refs: HashMap<&str, GroupRef> = desired
        .security_groups
        .iter()
        .map(|g| {
            let r = match chosen.get(g.name.as_str()) {
                Some(existing) => GroupRef::Id(existing.id.clone()),
                None => GroupRef::New(g.name.clone()),
            };
            (g.name.as_str(), r)
        })
        .collect();
    for (name, r) in &refs {
        if let GroupRef::Id(id) = r {
            out.known_groups.insert(name.to_string(), id.clone());
        }
    }
    let existing_id = |name: &str| match refs.get(name) {
        Some(GroupRef::Id(id)) => Some(id.clone()),
        _ => None,
    };
    for g in &desired.security_groups {
        let Some(existing) = chosen.get(g.name.as_str()) else {
            let mut tags = vec![OWNED_TAG.to_string()];
            tags.extend(g.tags.iter().cloned());
            out.create_groups.push(NewGroup {
                name: g.name.clone(),
                description: truncate(&g.description, 255),
                tags,
                rules: g.security_group_rules.clone(),
            });
            continue;
        };
        // Rules by value; a rule naming a group still to be created matches nothing yet.
        let wanted_rules: BTreeMap<SgRule, &SgRule> = g
            .security_group_rules
            .iter()
            .filter_map(|r| Some((key(r, existing_id)?, r)))
            .collect();
        let mut kept = BTreeSet::new();
        for r in &existing.rules {
            match &r.rule {
                Some(k) if wanted_rules.contains_key(k) && kept.insert(k.clone()) => {}
                _ => out.delete_rules.push(crate::plan::RuleDelete {
                    id: r.id.clone(),
                    group: g.name.clone(),
                }),
            }
        }
        for r in &g.security_group_rules {
            let present = key(r, existing_id).is_some_and(|k| kept.contains(&k));
            if !present {
                out.add_rules.push(RuleAdd {
                    group_id: existing.id.clone(),
                    group: g.name.clone(),
                    rule: r.clone(),
                });
            }
        }
    }
    for (name, g) in &chosen {
        if !wanted.contains(name) {
            out.delete_groups.push(GroupDelete {
                id: g.id.clone(),
                name: g.name.clone(),
            });
        }
    }
    plan_ports(desired, observed, &refs, &mut out);
    out
}

/// Matches pods to ports by fixed IP and plans each port's exact groups.
fn plan_ports(
    desired: &Translation,
    observed: &Observed,
    refs: &HashMap<&str, GroupRef>,
    out: &mut Plan,
) {
    let mut by_ip: HashMap<IpAddr, Vec<usize>> = HashMap::new();
    for (i, p) in observed.ports.iter().enumerate() {
        for ip in &p.fixed_ips {
            by_ip.entry(*ip).or_default().push(i);
        }
    }
    let owned_ids: BTreeSet<&str> = observed
        .groups
        .iter()
        .filter(|g| g.owned())
        .map(|g| g.id.as_str())
        .collect();
    let pod_ips: BTreeSet<IpAddr> = desired
        .ports
        .iter()
        .flat_map(|b| b.fixed_ips.iter().copied())
        .collect();
    for binding in &desired.ports {
        let mut found = BTreeSet::new();
        let mut problem = None;
        for ip in &binding.fixed_ips {
            match by_ip.get(ip).map(Vec::as_slice) {
                None | Some([]) => problem = Some(format!("no Neutron port has the address {ip}")),
                Some([one]) => {
                    found.insert(*one);
                }
                Some(many) => {
                    let ids: Vec<&str> = many
                        .iter()
                        .map(|&i| observed.ports[i].id.as_str())
                        .collect();
                    problem = Some(format!(
                        "ports {} all have the address {ip}",
                        ids.join(", ")
                    ));
                }
            }
        }
        if problem.is_none() && found.len() > 1 {
            let ids: Vec<&str> = found
                .iter()
                .map(|&i| observed.ports[i].id.as_str())
                .collect();
            problem = Some(format!(
                "its addresses belong to different ports ({})",
                ids.join(", ")
            ));
        }
        let port = match (problem, found.iter().next()) {
            (None, Some(&i)) => &observed.ports[i],
            (problem, _) => {
                out.unmatched.push(Unmatched {
                    pod: binding.pod.clone(),
                    reason: problem.unwrap_or_else(|| "it has no address".into()),
                });
                continue;
            }
        };
        let want: BTreeSet<GroupRef> = binding
            .security_groups
            .iter()
            .filter_map(|name| refs.get(name.as_str()).cloned())
            .collect();
        move_port(
            port.id.clone(),
            Some(binding.pod.clone()),
            &port.security_groups,
            want,
            out,
        );
    }
    // Ports that belong to no pod lose the owned groups they carry (a deleted pod's port
    // that still exists): only ever stricter.
    for p in &observed.ports {
        if p.fixed_ips.iter().any(|ip| pod_ips.contains(ip)) {
            continue;
        }
        if p.security_groups
            .iter()
            .any(|g| owned_ids.contains(g.as_str()))
        {
            let keep: Vec<GroupRef> = p
                .security_groups
                .iter()
                .filter(|g| !owned_ids.contains(g.as_str()))
                .map(|g| GroupRef::Id(g.clone()))
                .collect();
            out.tighten_ports.push(PortUpdate {
                port_id: p.id.clone(),
                pod: None,
                groups: keep,
            });
        }
    }
}

/// Plans a port's move from `current` (ids) to `want`: first to the groups it keeps
/// (when it loses some), then to `want` (when it gains some).
fn move_port(
    port_id: String,
    pod: Option<String>,
    current: &[String],
    want: BTreeSet<GroupRef>,
    out: &mut Plan,
) {
    let now: BTreeSet<GroupRef> = current.iter().map(|g| GroupRef::Id(g.clone())).collect();
    if now == want {
        return;
    }
    let keep: BTreeSet<GroupRef> = now.intersection(&want).cloned().collect();
    if keep != now {
        out.tighten_ports.push(PortUpdate {
            port_id: port_id.clone(),
            pod: pod.clone(),
            groups: keep.iter().cloned().collect(),
        });
    }
    if want != keep {
        out.set_ports.push(PortUpdate {
            port_id,
            pod,
            groups: want.into_iter().collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion
    use super::*;
    use crate::state::{PortState, Rule};
    use palisade_neutron::{PortBinding, SecurityGroup};

    fn rule(prefix: &str) -> SgRule {
        SgRule {
            direction: RuleDirection::Ingress,
            ethertype: Ethertype::IPv4,
            traffic: Traffic::Any,
            remote: Remote::Prefix(prefix.parse().unwrap()),
            description: "d".into(),
        }
    }

    fn group(name: &str, rules: &[&str]) -> SecurityGroup {
        SecurityGroup {
            name: name.into(),
            tags: vec![],
            description: String::new(),
            security_group_rules: rules.iter().map(|p| rule(p)).collect(),
        }
    }

    fn owned(id: &str, name: &str, rules: &[(&str, &str)]) -> Group {
        Group {
            id: id.into(),
            name: name.into(),
            tags: vec![OWNED_TAG.into()],
            rules: rules
                .iter()
                .map(|(rid, p)| Rule {
                    id: rid.to_string(),
                    rule: key(&rule(p), |n| Some(n.into())),
                })
                .collect(),
        }
    }

    fn port(id: &str, ip: &str, groups: &[&str]) -> PortState {
        PortState {
            id: id.into(),
            fixed_ips: vec![ip.parse().unwrap()],
            security_groups: groups.iter().map(|g| g.to_string()).collect(),
            device_owner: String::new(),
            network_id: String::new(),
        }
    }

    fn binding(pod: &str, ip: &str, groups: &[&str]) -> PortBinding {
        PortBinding {
            pod: pod.into(),
            fixed_ips: vec![ip.parse().unwrap()],
            security_groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn a_changed_state_is_planned_minimally_and_in_a_safe_order() {
        let desired = Translation {
            security_groups: vec![
                group("a", &["10.0.0.1/32", "10.0.0.3/32"]),
                group("c", &["10.0.0.9/32"]),
            ],
            ports: vec![
                binding("x/moved", "10.1.0.1", &["a", "c"]),
                binding("x/same", "10.1.0.2", &["a"]),
                binding("x/gone", "10.1.0.3", &["a"]),
                binding("x/twice", "10.1.0.4", &["a"]),
            ],
        };
        let observed = Observed {
            groups: vec![
                owned("id-a", "a", &[("r1", "10.0.0.1/32"), ("r2", "10.0.0.2/32")]),
                owned("id-b", "b", &[]),
                Group {
                    id: "id-default".into(),
                    name: "default".into(),
                    tags: vec![],
                    rules: vec![],
                },
            ],
            ports: vec![
                port("p1", "10.1.0.1", &["id-a", "id-b"]),
                port("p2", "10.1.0.2", &["id-a"]),
                port("p4", "10.1.0.4", &[]),
                port("p4b", "10.1.0.4", &[]),
                port("orphan", "10.9.9.9", &["id-b", "id-default"]),
            ],
        };
        let p = plan(&desired, &observed);
        assert_eq!(p.create_groups.len(), 1, "c is new");
        assert_eq!(
            p.create_groups[0].tags,
            vec![OWNED_TAG.to_string()],
            "owned from the start"
        );
        assert_eq!(
            p.delete_rules,
            vec![RuleDelete {
                id: "r2".into(),
                group: "a".into()
            }],
            "a loses one rule"
        );
        assert_eq!(p.add_rules.len(), 1, "and gains one");
        assert_eq!(p.add_rules[0].rule, rule("10.0.0.3/32"));
        let id = |s: &str| GroupRef::Id(s.into());
        assert_eq!(
            p.tighten_ports,
            vec![
                PortUpdate {
                    port_id: "p1".into(),
                    pod: Some("x/moved".into()),
                    groups: vec![id("id-a")]
                },
                PortUpdate {
                    port_id: "orphan".into(),
                    pod: None,
                    groups: vec![id("id-default")]
                },
            ],
            "first down to the groups kept; a port of no pod loses the owned groups only"
        );
        assert_eq!(
            p.set_ports,
            vec![PortUpdate {
                port_id: "p1".into(),
                pod: Some("x/moved".into()),
                groups: vec![id("id-a"), GroupRef::New("c".into())]
            }],
            "then up to the new set"
        );
        assert_eq!(
            p.delete_groups,
            vec![GroupDelete {
                id: "id-b".into(),
                name: "b".into()
            }],
            "b is not wanted; default is not owned"
        );
        let reasons: Vec<(&str, &str)> = p
            .unmatched
            .iter()
            .map(|u| (u.pod.as_str(), u.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                ("x/gone", "no Neutron port has the address 10.1.0.3"),
                ("x/twice", "ports p4, p4b all have the address 10.1.0.4"),
            ],
            "missing and ambiguous ports are reported, not guessed"
        );
    }

    #[test]
    fn the_state_reached_plans_nothing() {
        let desired = Translation {
            security_groups: vec![group("a", &["10.0.0.1/32"])],
            ports: vec![binding("x/p", "10.1.0.1", &["a"])],
        };
        let observed = Observed {
            groups: vec![owned("id-a", "a", &[("r1", "10.0.0.1/32")])],
            ports: vec![port("p1", "10.1.0.1", &["id-a"])],
        };
        assert!(plan(&desired, &observed).is_empty());
    }
}
