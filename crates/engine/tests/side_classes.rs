//! Side programs by class: every member of a class has the class's program, apart from its
//! exemptions, which `side_exempt` gives.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_engine::{Engine, Options, PodId};
use palisade_model::Direction;
use proptest::prelude::*;

/// Every member of a class has the class's program, apart from its exemptions.
fn check_members(e: &Engine) -> Result<(), TestCaseError> {
    let pods: Vec<PodId> = e.pod_ids().collect();
    for dir in [Direction::Ingress, Direction::Egress] {
        let classes = e.side_classes(&pods, dir);
        prop_assert_eq!(classes.class_of.len(), pods.len());
        prop_assert_eq!(classes.ids.len(), classes.programs.len());
        for (k, &p) in pods.iter().enumerate() {
            let mut want = e.side_program(p, dir);
            prop_assert_eq!(&want.exempt, &e.side_exempt(p, dir));
            want.exempt.clear();
            prop_assert_eq!(&classes.programs[classes.class_of[k]], &want, "pod {}", p);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(200, 0x0c1a_55e5))]

    #[test]
    fn members_have_their_class_program(c in palisade_gen::strategies::cluster(), node_local in any::<bool>()) {
        let e = Engine::new(c, Options { allow_node_local: node_local, ..Options::default() });
        check_members(&e)?;
    }
}

/// Classes with one list of admin policies share its rules only where they are the same
/// for every subject: an ingress named port resolves against each subject's container
/// ports, and a `sameLabels` peer against each subject's namespace.
#[test]
fn admin_rules_that_depend_on_the_subject_are_built_per_class() {
    let namespace = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}, labels: {{team: {name}}}}}\n---\n"
        )
    };
    let pod = |ns: &str, name: &str, port: u16, ip: u8| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {ns}, labels: {{app: web}}}}\n\
             spec: {{containers: [{{name: c, ports: [{{name: web, containerPort: {port}}}]}}]}}\n\
             status: {{podIP: 10.0.0.{ip}}}\n---\n"
        )
    };
    let docs = [
        namespace("a"),
        namespace("b"),
        pod("a", "on-80", 80, 1),
        pod("a", "on-81", 81, 2),
        pod("b", "other", 80, 3),
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
         metadata: {name: by-name}\nspec: {priority: 1, subject: {namespaces: {}}, \
         ingress: [{name: r, action: Deny, from: [{namespaces: {}}], ports: [{namedPort: web}]}]}\n---\n"
            .to_string(),
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
         metadata: {name: same-team}\nspec: {priority: 2, subject: {namespaces: {}}, \
         egress: [{name: r, action: Allow, to: [{namespaces: {sameLabels: [team]}}]}]}\n"
            .to_string(),
    ]
    .concat();
    let loaded = palisade_model::load_str(&docs).unwrap_or_else(|e| panic!("{e}"));
    let e = Engine::new(loaded.cluster, Options::default());
    check_members(&e).unwrap();
}
