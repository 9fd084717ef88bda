//! Against a real Neutron: the sync touches only the groups of its own project that carry
//! its cluster's tag. A group another project shares (Neutron RBAC) under one of our
//! names is never adopted nor put on our ports; two clusters in one project never change
//! each other's groups or ports; a group creation whose answer is lost leaves no
//! duplicate, and a group an earlier run made but did not tag is adopted and tagged.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use common::{Fault, engine, generated, translation};
use palisade_neutron::OPEN_EGRESS;
use palisade_neutron_sync::client::Client;
use palisade_neutron_sync::plan::creation_description;
use palisade_neutron_sync::state::{OWNED_TAG, Owner, PortFilter, list_groups, list_ports};
use palisade_neutron_sync::{SyncOptions, sync};
use serde_json::json;

fn options(filter: &PortFilter, cluster_id: &str) -> SyncOptions {
    SyncOptions {
        dry_run: false,
        ports: filter.clone(),
        cluster_id: cluster_id.into(),
    }
}

/// Every group of `project` (as its client sees them) by id: name, tags and rule ids.
fn groups_of(c: &Client, project: &str) -> BTreeMap<String, (String, Vec<String>, Vec<String>)> {
    list_groups(c, None)
        .unwrap()
        .into_iter()
        .filter(|g| g.project_id == project)
        .map(|g| {
            let mut tags = g.tags.clone();
            tags.sort();
            let mut rules: Vec<String> = g.rules.iter().map(|r| r.id.clone()).collect();
            rules.sort();
            (g.id, (g.name, tags, rules))
        })
        .collect()
}

#[test]
fn a_group_another_project_shares_is_never_adopted_nor_put_on_our_ports() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let (ours, theirs) = (common::project_uuid(), common::project("rbac-theirs"));
    let (c, other) = (common::client(&url, &ours), common::client(&url, &theirs));
    let e = engine(&generated(21));
    let t = translation(&e);
    assert!(
        t.security_groups.iter().any(|g| g.name == OPEN_EGRESS),
        "the case needs {OPEN_EGRESS}"
    );
    // The other project (member role) makes a look-alike, opens it, and shares it with us.
    let made = other
        .post(
            "security-groups",
            &json!({"security_group": {"name": OPEN_EGRESS}}),
        )
        .unwrap();
    let shared_id = made["security_group"]["id"].as_str().unwrap().to_string();
    other
        .put(
            &format!("security-groups/{shared_id}/tags"),
            &json!({"tags": [OWNED_TAG, "palisade-cluster:default"]}),
        )
        .unwrap();
    other
        .post(
            "security-group-rules",
            &json!({"security_group_rule": {"security_group_id": shared_id, "direction": "ingress", "ethertype": "IPv4"}}),
        )
        .unwrap();
    other
        .post(
            "rbac-policies",
            &json!({"rbac_policy": {"object_type": "security_group", "object_id": shared_id,
                    "action": "access_as_shared", "target_tenant": ours}}),
        )
        .unwrap();
    assert!(
        list_groups(&c, Some(OWNED_TAG))
            .unwrap()
            .iter()
            .any(|g| g.id == shared_id),
        "the shared group is visible to our project (else the case tests nothing)"
    );
    let filter = common::pod_ports(&c, &e.cluster().pods);
    // One of our ports already carries it (as an earlier version left it).
    let first = list_ports(&c, &filter).unwrap().remove(0);
    c.put(
        &format!("ports/{}", first.id),
        &json!({"port": {"security_groups": [shared_id]}}),
    )
    .unwrap();
    let their_groups = groups_of(&other, &theirs);

    let report = sync(&c, &t, &options(&filter, "default")).unwrap();
    assert!(report.ok(), "{:?}", report.applied);
    let refused: Vec<&str> = report.refused.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(refused, [shared_id.as_str()], "the look-alike is reported");
    for p in list_ports(&c, &filter).unwrap() {
        assert!(
            !p.security_groups.contains(&shared_id),
            "port {} carries the shared group",
            p.id
        );
    }
    let mine = groups_of(&c, &ours);
    assert_eq!(
        mine.values().filter(|(n, _, _)| n == OPEN_EGRESS).count(),
        1,
        "our project has its own {OPEN_EGRESS}"
    );
    assert_eq!(
        groups_of(&other, &theirs),
        their_groups,
        "the other project's groups and rules are untouched"
    );
    let again = sync(&c, &t, &options(&filter, "default")).unwrap();
    assert_eq!(again.counts.writes, 0, "{:#?}", again.calls);
}

#[test]
fn two_clusters_in_one_project_never_touch_each_other() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let project = common::project("clusters");
    let c = common::client(&url, &project);
    let g = generated(22);
    let e = engine(&g);
    // Each cluster on a network of its own, with the same pod addresses.
    let (net_a, net_b) = (
        common::pod_ports(&c, &e.cluster().pods),
        common::pod_ports(&c, &e.cluster().pods),
    );
    let t_a = translation(&e);
    assert!(sync(&c, &t_a, &options(&net_a, "a")).unwrap().ok());
    let groups_a = groups_of(&c, &project);
    let ports_a = list_ports(&c, &net_a).unwrap();
    // Cluster b has the same groups' names, and different rules: its policies are gone.
    let mut g_b = g.clone();
    g_b.policies.clear();
    let t_b = translation(&engine(&g_b));
    let b = sync(&c, &t_b, &options(&net_b, "b")).unwrap();
    assert!(b.ok(), "{:?}", b.applied);
    assert!(
        b.refused.is_empty(),
        "a sibling cluster's groups are not reported"
    );
    let after: BTreeMap<_, _> = groups_of(&c, &project)
        .into_iter()
        .filter(|(id, _)| groups_a.contains_key(id))
        .collect();
    assert_eq!(
        after, groups_a,
        "cluster a's groups and rules are untouched"
    );
    assert_eq!(
        list_ports(&c, &net_a).unwrap(),
        ports_a,
        "cluster a's ports are untouched"
    );
    let names_b: BTreeSet<String> = groups_of(&c, &project)
        .into_iter()
        .filter(|(id, (_, tags, _))| {
            !groups_a.contains_key(id) && tags.contains(&"palisade-cluster:b".to_string())
        })
        .map(|(_, (name, _, _))| name)
        .collect();
    let wanted_b: BTreeSet<String> = t_b.security_groups.iter().map(|g| g.name.clone()).collect();
    assert_eq!(names_b, wanted_b, "cluster b made its own groups");
    for (cluster, t, filter) in [("a", &t_a, &net_a), ("b", &t_b, &net_b)] {
        let again = sync(&c, t, &options(filter, cluster)).unwrap();
        assert_eq!(
            again.counts.writes, 0,
            "cluster {cluster} has nothing to undo: {:#?}",
            again.calls
        );
    }
    // Without --network, each cluster skips the ports carrying the other's groups.
    let everything = PortFilter::default();
    let ports_b = list_ports(&c, &net_b).unwrap();
    let again = sync(&c, &t_a, &options(&everything, "a")).unwrap();
    assert!(
        again.unplaceable.is_empty(),
        "cluster b's ports are not cluster a's: {:?}",
        again.unplaceable
    );
    assert_eq!(
        list_ports(&c, &net_b).unwrap(),
        ports_b,
        "cluster b's ports are untouched"
    );
}

#[test]
fn a_lost_creation_answer_leaves_no_duplicate_and_leftovers_are_adopted() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let project = common::project("lost");
    let c = common::client(&url, &project);
    let e = engine(&generated(23));
    let t = translation(&e);
    let filter = common::pod_ports(&c, &e.cluster().pods);
    // An earlier run made one group and stopped before tagging it.
    let owner = Owner::new(&project, "default").unwrap();
    let leftover = &t.security_groups[0];
    let made = c
        .post(
            "security-groups",
            &json!({"security_group": {"name": leftover.name,
                    "description": creation_description(&owner, &leftover.description)}}),
        )
        .unwrap();
    let leftover_id = made["security_group"]["id"].as_str().unwrap().to_string();
    // Neutron makes the groups of the first bulk creation, and the answer is lost.
    let lost = Arc::new(Mutex::new(0));
    let count = lost.clone();
    let proxy = common::proxy(&url, move |m, p| {
        let mut n = count.lock().unwrap();
        if m == "POST" && p.ends_with("/security-groups") && *n == 0 {
            *n += 1;
            Fault::LoseAnswer(502)
        } else {
            Fault::None
        }
    });
    let through = common::client(&proxy, &project);
    let report = sync(&through, &t, &options(&filter, "default")).unwrap();
    assert_eq!(*lost.lock().unwrap(), 1, "an answer was lost");
    assert!(report.ok(), "{:?}", report.applied);
    let mut by_name: BTreeMap<String, Vec<(String, Vec<String>)>> = BTreeMap::new();
    for (id, (name, tags, _)) in groups_of(&c, &project) {
        by_name.entry(name).or_default().push((id, tags));
    }
    for g in &t.security_groups {
        let held = &by_name[&g.name];
        assert_eq!(held.len(), 1, "{}: one group, not {held:?}", g.name);
        assert!(
            held[0].1.contains(&OWNED_TAG.to_string())
                && held[0].1.contains(&"palisade-cluster:default".to_string()),
            "{}: tagged ours: {held:?}",
            g.name
        );
    }
    assert_eq!(
        by_name[&leftover.name][0].0, leftover_id,
        "the leftover was adopted, not duplicated"
    );
    let again = sync(&c, &t, &options(&filter, "default")).unwrap();
    assert_eq!(again.counts.writes, 0, "{:#?}", again.calls);
}
