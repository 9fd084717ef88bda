//! Pods spread over several nodes: each node enforces only its own pods' sides (egress at
//! the source's node, ingress at the destination's), the node-local exemption only from a
//! node's own address, and together they equal the evaluator.

use palisade_analysis::Probe;
use palisade_engine::{Engine, Options};
use palisade_lab::{EndpointKind, Lab, LabEndpoint, Observation, Observed};
use palisade_model::Protocol;
use palisade_test_support::require_root;

use crate::harness::{Placement, THREE_NODES, TWO_NODES, TestLab};

/// Every policy set on `placement`'s nodes (those `keep` accepts): the kernel matrix,
/// nodes' addresses included, equals the evaluator.
fn matrix_equals_evaluator(tag: char, placement: Placement, keep: impl Fn(usize) -> bool) {
    let lab = TestLab::up(tag, placement);
    assert_eq!(lab.lab.nodes.len(), placement.nodes.len());
    for (node, name) in lab.lab.nodes.iter().zip(placement.nodes) {
        assert_eq!(node.netns, format!("{}-node-{name}", lab.lab.name));
    }
    let sets = lab.policy_sets(keep);
    let (failures, probes) = lab.matrix_disagreements(&sets);
    assert!(
        failures.is_empty(),
        "{} of {probes} probes disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_policy_set_on_two_nodes_the_kernel_matrix_equals_the_evaluator() {
    if !require_root("every_policy_set_on_two_nodes_the_kernel_matrix_equals_the_evaluator") {
        return;
    }
    matrix_equals_evaluator('t', TWO_NODES, |_| true);
}

/// Every third set (0, 3, 6, ...: 14 of 40) keeps the suite's time down; the two-node test
/// runs them all.
#[test]
fn a_third_of_the_policy_sets_on_three_nodes_the_kernel_matrix_equals_the_evaluator() {
    if !require_root(
        "a_third_of_the_policy_sets_on_three_nodes_the_kernel_matrix_equals_the_evaluator",
    ) {
        return;
    }
    matrix_equals_evaluator('h', THREE_NODES, |i| i % 3 == 0);
}

/// Whether endpoint `o.to` is a pod and `o.from` a node's address: own node or another.
fn node_to_pod(lab: &Lab, observed: &Observed, o: &Observation) -> Option<bool> {
    let (from, to) = (&observed.endpoints()[o.from], &observed.endpoints()[o.to]);
    (from.kind == EndpointKind::Node && to.kind == EndpointKind::Pod)
        .then(|| lab.node_of(from).map(|n| &n.netns) == lab.node_of(to).map(|n| &n.netns))
}

#[test]
fn the_node_local_exemption_holds_only_on_the_pods_own_node() {
    if !require_root("the_node_local_exemption_holds_only_on_the_pods_own_node") {
        return;
    }
    let lab = TestLab::up('l', THREE_NODES);
    let deny_all = TestLab::fixture("03-deny-both-all");
    let probes = [Probe {
        protocol: Protocol::Tcp,
        port: 80,
    }];
    for allow_node_local in [true, false] {
        let options = Options {
            allow_node_local,
            ..Options::default()
        };
        let set = lab.policy_set(&deny_all, options);
        lab.apply(&set);
        lab.conntrack_flush();
        let observed = lab.observe(&probes);
        let mut checked = [0, 0]; // other node, own node
        let mut wrong = Vec::new();
        for o in observed.observations() {
            let Some(own) = node_to_pod(&lab.lab, &observed, o) else {
                continue;
            };
            checked[usize::from(own)] += 1;
            // Every pod isolates ingress: only its own node's address may reach it, and
            // only while the exemption is on.
            if o.reached != (own && allow_node_local) {
                let e = observed.endpoints();
                wrong.push(format!(
                    "{} -> {}: reached {} (own node: {own})",
                    e[o.from].key, e[o.to].key, o.reached
                ));
            }
        }
        // 9 pods, 3 nodes: each pod has its own node and two others.
        assert_eq!(checked, [18, 9], "node-to-pod probes");
        assert!(
            wrong.is_empty(),
            "allow_node_local {allow_node_local}:\n{}",
            wrong.join("\n")
        );
        let disagreements = observed.disagreements(&set.engine);
        assert!(
            disagreements.is_empty(),
            "allow_node_local {allow_node_local}:\n{}",
            disagreements
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// What the cluster allows while the node namespace `updated` enforces `new` and every
/// other node `old`: egress as the source's node decides, ingress as the destination's.
fn split_verdict(
    lab: &Lab,
    observed: &Observed,
    o: &Observation,
    updated: &str,
    (old, new): (&Engine, &Engine),
) -> bool {
    let engine = |e: &LabEndpoint| {
        if lab.node_of(e).is_some_and(|n| n.netns == updated) {
            new
        } else {
            old
        }
    };
    let (from, to) = (&observed.endpoints()[o.from], &observed.endpoints()[o.to]);
    let (egress, ingress) = (engine(from), engine(to));
    egress.evaluate(&observed.flow(egress, o)).egress.allowed
        && ingress.evaluate(&observed.flow(ingress, o)).ingress.allowed
}

#[test]
fn an_update_on_one_node_changes_only_that_nodes_sides() {
    if !require_root("an_update_on_one_node_changes_only_that_nodes_sides") {
        return;
    }
    let lab = TestLab::up('i', THREE_NODES);
    let old = lab.policy_set(&TestLab::fixture("01-deny-ingress-x"), Options::default());
    let new = lab.policy_set(&TestLab::fixture("02-deny-egress-y"), Options::default());
    lab.apply(&old);
    let nodes = &lab.lab.nodes;
    let before: Vec<String> = nodes.iter().map(|n| lab.list_table(&n.netns)).collect();
    // Only the first node moves to the new set.
    let first = nodes[0].netns.clone();
    let stats = palisade_nft::update(&old.rulesets[0], &new.rulesets[0], Some(&first))
        .unwrap_or_else(|e| panic!("update {first}: {e}"));
    let after: Vec<String> = nodes.iter().map(|n| lab.list_table(&n.netns)).collect();
    assert_ne!(
        before[0], after[0],
        "the updated node's table did not change"
    );
    for i in 1..nodes.len() {
        assert_eq!(
            before[i], after[i],
            "{}: the table changed when only {first} was updated",
            nodes[i].netns
        );
    }
    // Egress from the first node's pods and ingress into them follow the new set, every
    // other side the old one.
    lab.conntrack_flush();
    let observed = lab.observe(&[Probe {
        protocol: Protocol::Tcp,
        port: 80,
    }]);
    let (mut wrong, mut differ_old, mut differ_new) = (Vec::new(), 0, 0);
    for o in observed.observations() {
        let want = split_verdict(&lab.lab, &observed, o, &first, (&old.engine, &new.engine));
        differ_old += usize::from(want != observed.allowed(&old.engine, o));
        differ_new += usize::from(want != observed.allowed(&new.engine, o));
        if o.reached != want {
            let e = observed.endpoints();
            wrong.push(format!(
                "{} -> {}: kernel {}, split verdict {want}",
                e[o.from].key, e[o.to].key, o.reached
            ));
        }
    }
    assert!(
        differ_old > 0 && differ_new > 0,
        "the split state must differ from both sets ({differ_old}, {differ_new} probes)"
    );
    assert!(
        wrong.is_empty(),
        "after updating {first} only ({stats:?}):\n{}",
        wrong.join("\n")
    );
    // The other nodes follow: the whole cluster enforces the new set.
    for (i, node) in nodes.iter().enumerate().skip(1) {
        palisade_nft::update(&old.rulesets[i], &new.rulesets[i], Some(&node.netns))
            .unwrap_or_else(|e| panic!("update {}: {e}", node.netns));
    }
    lab.conntrack_flush();
    let observed = lab.observe(&[Probe {
        protocol: Protocol::Tcp,
        port: 80,
    }]);
    let disagreements = observed.disagreements(&new.engine);
    assert!(
        disagreements.is_empty(),
        "{}",
        disagreements
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}
