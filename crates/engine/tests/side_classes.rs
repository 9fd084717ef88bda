//! Side programs by class: every member of a class has the class's program, apart from its
//! exemptions, which `side_exempt` gives.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use palisade_engine::{Engine, Options, PodId};
use palisade_model::Direction;
use proptest::prelude::*;

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(200, 0x0c1a_55e5))]

    #[test]
    fn members_have_their_class_program(c in palisade_gen::strategies::cluster(), node_local in any::<bool>()) {
        let e = Engine::new(c, Options { allow_node_local: node_local, ..Options::default() });
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
    }
}
