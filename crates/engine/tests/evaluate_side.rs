//! One side of a verdict, decided alone, is that side of the whole verdict.

#![allow(missing_docs)] // a test

use std::net::IpAddr;

use palisade_engine::{Engine, Flow, Options};
use palisade_model::{Direction, Protocol};
use proptest::prelude::*;

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(200, 0x51de_2026))]

    #[test]
    fn evaluate_side_is_that_side_of_evaluate(c in palisade_gen::strategies::cluster(), node_local in any::<bool>()) {
        let e = Engine::new(c, Options { allow_node_local: node_local, ..Options::default() });
        let mut ips: Vec<IpAddr> = e.cluster().pods.iter().flat_map(|p| p.ips.clone()).collect();
        ips.extend(e.cluster().nodes.iter().flat_map(|n| n.addresses.clone()));
        ips.push(IpAddr::from([203, 0, 113, 7]));
        let mut endpoints: Vec<_> = ips.into_iter().map(|ip| e.endpoint_for_ip(ip)).collect();
        // Pods with no address of their own, as the analyses probe them.
        endpoints.extend(e.pod_ids().filter_map(|p| e.endpoint_for_pod(p, None)));
        for &src in &endpoints {
            for &dst in &endpoints {
                for protocol in Protocol::ALL {
                    let flow = Flow { src, dst, protocol, port: 80 };
                    let v = e.evaluate(&flow);
                    prop_assert_eq!(&e.evaluate_side(&flow, Direction::Egress), &v.egress, "{:?}", flow);
                    prop_assert_eq!(&e.evaluate_side(&flow, Direction::Ingress), &v.ingress, "{:?}", flow);
                }
            }
        }
    }
}
