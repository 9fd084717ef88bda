//! The calls that bring Neutron from what it holds ([`Observed`]) to the translation: a
//! pure function, so `--dry-run` prints exactly what an apply would do.
//!
//! Minimal by construction: groups are matched by name among this cluster's own ones
//! ([`Owner`]), rules by value (rules are immutable, so a changed rule is one deletion and
//! one creation), ports by fixed IP; nothing equal is touched, so a second sync writes
//! nothing. Groups of other projects and clusters are never matched, changed or given to
//! a port; a port that cannot be placed (two pods' addresses, or a pod's address on
//! several ports) is closed ([`crate::placement`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use palisade_neutron::{Ethertype, Remote, RuleDirection, SgRule, Traffic, Translation};
use serde::Serialize;

use crate::placement::{Placement, Unplaceable, place};
use ipnet::IpNet;

use crate::state::{AddrGroup, Group, OWNED_TAG, Observed, Owner, Ownership, truncate};

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

/// An address group to create (`--peer-mode address-groups`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewAddressGroup {
    /// Name.
    pub name: String,
    /// Description (starts with the cluster's [`Owner::description_prefix`]).
    pub description: String,
    /// Its addresses.
    #[serde(serialize_with = "palisade_neutron::prefixes_as_strings")]
    pub addresses: Vec<IpNet>,
}

/// Addresses an existing address group loses or gains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddressChange {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The addresses.
    #[serde(serialize_with = "palisade_neutron::prefixes_as_strings")]
    pub addresses: Vec<IpNet>,
}

/// An untagged group of an earlier sync's, taken as the cluster's: it gets the cluster tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupAdopt {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The tag it gets.
    pub tag: String,
}

/// A group named like one of this cluster's that is not this cluster's: never adopted,
/// never changed, never given to a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The project it belongs to.
    pub project_id: String,
    /// Why it is not ours.
    pub reason: String,
}

/// A pod whose port could not be found (reported; nothing of its is opened).
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
    /// 1. Groups of an earlier sync to tag with the cluster's tag.
    pub adopt_groups: Vec<GroupAdopt>,
    /// 1. Address groups to create (no rule refers to them yet).
    pub create_address_groups: Vec<NewAddressGroup>,
    /// 1. Groups to create, each with its rules (nothing carries them yet).
    pub create_groups: Vec<NewGroup>,
    /// 2. Rules to remove from owned groups (only ever stricter).
    pub delete_rules: Vec<RuleDelete>,
    /// 2. Addresses existing address groups lose (only ever stricter).
    pub remove_addresses: Vec<AddressChange>,
    /// 3. Ports moved to the groups they keep: what they carry now and will carry after
    ///    (only ever stricter); ports that cannot be placed lose every group.
    pub tighten_ports: Vec<PortUpdate>,
    /// 4. Ports given their exact new groups.
    pub set_ports: Vec<PortUpdate>,
    /// 5. Rules to add to existing groups.
    pub add_rules: Vec<RuleAdd>,
    /// 5. Addresses existing address groups gain.
    pub add_addresses: Vec<AddressChange>,
    /// 6. Owned groups nothing wants any more (no port carries them now).
    pub delete_groups: Vec<GroupDelete>,
    /// Pods no port has an address of: nothing to change.
    pub unmatched: Vec<Unmatched>,
    /// Ports that cannot be placed, closed (they carry no group).
    pub unplaceable: Vec<Unplaceable>,
    /// Groups named like this cluster's that are not its own.
    pub refused: Vec<Refused>,
    /// 6. The cluster's address groups nothing wants any more (no rule refers to them
    ///    now).
    pub delete_address_groups: Vec<GroupDelete>,
    /// The ids of the wanted groups and address groups Neutron already has, by name
    /// (rules name remote groups and address groups by name; the translation never gives
    /// the two the same name).
    pub known_groups: BTreeMap<String, String>,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.adopt_groups.is_empty()
            && self.create_address_groups.is_empty()
            && self.create_groups.is_empty()
            && self.delete_rules.is_empty()
            && self.remove_addresses.is_empty()
            && self.add_addresses.is_empty()
            && self.delete_address_groups.is_empty()
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

/// A rule without its description, its remote group or address group named by `rename`.
pub fn key(rule: &SgRule, rename: impl Fn(&str) -> Option<String>) -> Option<SgRule> {
    let remote = match &rule.remote {
        Remote::Group(g) => Remote::Group(rename(g)?),
        Remote::AddressGroup(g) => Remote::AddressGroup(rename(g)?),
        other => other.clone(),
    };
    Some(SgRule {
        remote,
        description: String::new(),
        ..rule.clone()
    })
}

/// The description a new group is created with: the cluster, then the translation's
/// (at most 255 characters). A group whose creation answer was lost is recognised by it.
pub fn creation_description(owner: &Owner, description: &str) -> String {
    truncate(&format!("{}{description}", owner.description_prefix()), 255)
}

/// Plans the calls from `observed` to `desired`, for `owner`.
pub fn plan(desired: &Translation, observed: &Observed, owner: &Owner) -> Plan {
    let mut out = Plan::default();
    // This cluster's groups by name; a name held twice (an interrupted earlier run) keeps
    // the first by id and deletes the others.
    let mut owned: BTreeMap<&str, Vec<&Group>> = BTreeMap::new();
    for g in observed.groups.iter().chain(&observed.legacy) {
        owned.entry(&g.name).or_default().push(g);
    }
    for g in &observed.legacy {
        out.adopt_groups.push(GroupAdopt {
            id: g.id.clone(),
            name: g.name.clone(),
            tag: owner.cluster_tag(),
        });
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
    out.refused = refused(observed, &wanted);
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
    let address_ids = plan_address_groups(desired, observed, owner, &mut out);
    for (name, id) in &address_ids {
        out.known_groups.insert(name.clone(), id.clone());
    }
    let existing_id = |name: &str| match refs.get(name) {
        Some(GroupRef::Id(id)) => Some(id.clone()),
        _ => address_ids.get(name).cloned(),
    };
    for g in &desired.security_groups {
        let Some(existing) = chosen.get(g.name.as_str()) else {
            let mut tags = vec![OWNED_TAG.to_string(), owner.cluster_tag()];
            tags.extend(g.tags.iter().cloned());
            out.create_groups.push(NewGroup {
                name: g.name.clone(),
                description: creation_description(owner, &g.description),
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

/// Plans the address groups: created when missing, their addresses changed when they
/// differ, deleted when unwanted (a name held twice keeps the lowest id). Returns the ids
/// of the wanted ones Neutron has, by name.
fn plan_address_groups(
    desired: &Translation,
    observed: &Observed,
    owner: &Owner,
    out: &mut Plan,
) -> BTreeMap<String, String> {
    let mut held: BTreeMap<&str, Vec<&AddrGroup>> = BTreeMap::new();
    for g in &observed.address_groups {
        held.entry(&g.name).or_default().push(g);
    }
    let wanted: BTreeMap<&str, &palisade_neutron::AddressGroup> = desired
        .address_groups
        .iter()
        .map(|g| (g.name.as_str(), g))
        .collect();
    let mut ids = BTreeMap::new();
    for (name, mut groups) in held {
        groups.sort_by(|a, b| a.id.cmp(&b.id));
        let extra = if let Some(want) = wanted.get(name) {
            let g = groups[0];
            ids.insert(name.to_string(), g.id.clone());
            let have: BTreeSet<&IpNet> = g.addresses.iter().collect();
            let need: BTreeSet<&IpNet> = want.addresses.iter().collect();
            let change = |set: BTreeSet<&IpNet>| AddressChange {
                id: g.id.clone(),
                name: g.name.clone(),
                addresses: set.into_iter().copied().collect(),
            };
            let (gone, new) = (&have - &need, &need - &have);
            if !gone.is_empty() {
                out.remove_addresses.push(change(gone));
            }
            if !new.is_empty() {
                out.add_addresses.push(change(new));
            }
            &groups[1..]
        } else {
            &groups[..]
        };
        for g in extra {
            out.delete_address_groups.push(GroupDelete {
                id: g.id.clone(),
                name: g.name.clone(),
            });
        }
    }
    for g in &desired.address_groups {
        if !ids.contains_key(&g.name) {
            out.create_address_groups.push(NewAddressGroup {
                name: g.name.clone(),
                description: creation_description(owner, &g.description),
                addresses: g.addresses.clone(),
            });
        }
    }
    ids
}

/// The groups named like one of `wanted` that are not this cluster's, except another
/// cluster's in the same project (which is that cluster's business).
fn refused(observed: &Observed, wanted: &BTreeSet<&str>) -> Vec<Refused> {
    observed
        .foreign
        .iter()
        .filter(|(g, _)| wanted.contains(g.name.as_str()))
        .filter_map(|(g, whose)| {
            let reason = match whose {
                Ownership::OtherProject => format!(
                    "it belongs to project {} (shared with this one)",
                    g.project_id
                ),
                Ownership::Unclaimed => {
                    "it names no cluster (made by hand, or before cluster ids)".to_string()
                }
                _ => return None,
            };
            Some(Refused {
                id: g.id.clone(),
                name: g.name.clone(),
                project_id: g.project_id.clone(),
                reason,
            })
        })
        .collect()
}

/// Places pods on ports by fixed IP and plans each port's exact groups; closes the ports
/// that cannot be placed.
fn plan_ports(
    desired: &Translation,
    observed: &Observed,
    refs: &HashMap<&str, GroupRef>,
    out: &mut Plan,
) {
    let owned_ids: BTreeSet<&str> = observed
        .groups
        .iter()
        .chain(&observed.legacy)
        .map(|g| g.id.as_str())
        .collect();
    let Placement {
        placed,
        unmatched,
        unplaceable,
        orphans,
    } = place(desired, observed);
    out.unmatched = unmatched;
    for (binding, port) in placed {
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
    // Fail closed: a port that cannot be placed carries no group, before any group gains
    // a rule (phase 3 comes before phase 5).
    for u in &unplaceable {
        if !u.security_groups.is_empty() {
            out.tighten_ports.push(PortUpdate {
                port_id: u.port_id.clone(),
                pod: None,
                groups: Vec::new(),
            });
        }
    }
    out.unplaceable = unplaceable;
    // Ports that belong to no pod lose this cluster's groups (a deleted pod's port that
    // still exists): only ever stricter.
    for p in orphans {
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

    fn owner() -> Owner {
        Owner::new("p", "c1").unwrap()
    }

    fn owned(id: &str, name: &str, rules: &[(&str, &str)]) -> Group {
        Group {
            id: id.into(),
            name: name.into(),
            project_id: "p".into(),
            description: String::new(),
            tags: vec![OWNED_TAG.into(), owner().cluster_tag()],
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
            address_groups: vec![],
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
            ],
            ports: vec![
                port("p1", "10.1.0.1", &["id-a", "id-b"]),
                port("p2", "10.1.0.2", &["id-a"]),
                port("p4", "10.1.0.4", &["id-a"]),
                port("p4b", "10.1.0.4", &[]),
                port("orphan", "10.9.9.9", &["id-b", "id-default"]),
            ],
            ..Observed::default()
        };
        let p = plan(&desired, &observed, &owner());
        assert_eq!(p.create_groups.len(), 1, "c is new");
        assert_eq!(
            p.create_groups[0].tags,
            vec![OWNED_TAG.to_string(), "palisade-cluster:c1".into()],
            "owned by the cluster from the start"
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
                    port_id: "p4".into(),
                    pod: None,
                    groups: vec![]
                },
                PortUpdate {
                    port_id: "orphan".into(),
                    pod: None,
                    groups: vec![id("id-default")]
                },
            ],
            "first down to the groups kept; ports that cannot be placed lose every group; a port of no pod loses the owned groups only"
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
            vec![("x/gone", "no Neutron port has the address 10.1.0.3")],
            "missing ports are reported"
        );
        let closed: Vec<(&str, &str)> = p
            .unplaceable
            .iter()
            .map(|u| (u.port_id.as_str(), u.reason.as_str()))
            .collect();
        assert_eq!(
            closed,
            vec![
                ("p4", "pod x/twice's addresses are held by ports p4, p4b"),
                ("p4b", "pod x/twice's addresses are held by ports p4, p4b"),
            ],
            "ambiguous ports are reported and closed, never guessed"
        );
    }

    #[test]
    fn the_state_reached_plans_nothing() {
        let desired = Translation {
            address_groups: vec![],
            security_groups: vec![group("a", &["10.0.0.1/32"])],
            ports: vec![binding("x/p", "10.1.0.1", &["a"])],
        };
        let observed = Observed {
            groups: vec![owned("id-a", "a", &[("r1", "10.0.0.1/32")])],
            ports: vec![port("p1", "10.1.0.1", &["id-a"])],
            ..Observed::default()
        };
        assert!(plan(&desired, &observed, &owner()).is_empty());
    }

    #[test]
    fn groups_of_other_projects_and_clusters_are_never_ours() {
        let desired = Translation {
            address_groups: vec![],
            security_groups: vec![group("a", &["10.0.0.1/32"])],
            ports: vec![
                binding("x/p", "10.1.0.1", &["a"]),
                binding("x/q", "10.1.0.2", &["a"]),
                binding("x/r", "10.1.0.3", &["a"]),
            ],
        };
        let tagged = |id: &str, project: &str, tags: &[&str]| Group {
            project_id: project.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..owned(id, "a", &[("r1", "10.0.0.1/32")])
        };
        let shared = tagged("id-shared", "other", &[OWNED_TAG, "palisade-cluster:c1"]);
        let sibling = tagged("id-sibling", "p", &[OWNED_TAG, "palisade-cluster:c2"]);
        let bare = tagged("id-bare", "p", &[OWNED_TAG]);
        let me = owner();
        let observed = Observed {
            foreign: [&shared, &sibling, &bare]
                .into_iter()
                .map(|g| (g.clone(), me.classify(g)))
                .collect(),
            ports: vec![
                port("p1", "10.1.0.1", &["id-shared"]),
                port("p2", "10.1.0.2", &["id-sibling"]),
                port("p3", "10.1.0.3", &[]),
            ],
            ..Observed::default()
        };
        let p = plan(&desired, &observed, &me);
        assert_eq!(p.create_groups.len(), 1, "a is created, not adopted");
        let refused: Vec<&str> = p.refused.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(
            refused,
            ["id-shared", "id-bare"],
            "another project's and an unclaimed look-alike are reported; a sibling cluster's is its own business"
        );
        let new = GroupRef::New("a".into());
        assert_eq!(
            p.tighten_ports,
            vec![PortUpdate {
                port_id: "p1".into(),
                pod: Some("x/p".into()),
                groups: vec![]
            }],
            "the shared group is taken off our port"
        );
        let set: Vec<(&str, &[GroupRef])> = p
            .set_ports
            .iter()
            .map(|u| (u.port_id.as_str(), u.groups.as_slice()))
            .collect();
        assert_eq!(
            set,
            vec![
                ("p1", std::slice::from_ref(&new)),
                ("p3", std::slice::from_ref(&new))
            ],
            "the sibling cluster's port is not touched"
        );
        assert_eq!(
            p.unmatched.len(),
            1,
            "x/q has no port of ours: {:?}",
            p.unmatched
        );
        let legacy = Owner::new("p", "default").unwrap();
        let observed = Observed {
            legacy: vec![bare.clone()],
            ..Observed::default()
        };
        let p = plan(&desired, &observed, &legacy);
        assert_eq!(
            p.adopt_groups,
            vec![GroupAdopt {
                id: "id-bare".into(),
                name: "a".into(),
                tag: "palisade-cluster:default".into()
            }],
            "the default cluster adopts the groups made before cluster ids"
        );
        assert!(p.create_groups.is_empty(), "and uses them");
    }
}
