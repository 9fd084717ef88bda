//! The matrix computed a source class at a time by set algebra equals the one evaluated
//! class pair by class pair with `Engine::evaluate`, on random clusters with every tier,
//! named ports, CIDRs, host-network pods, IPv6 and dual-stack pods, shared addresses,
//! workloads without addresses and both isolation models.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_analysis::{Analysis, Matrix, Probe};
use palisade_engine::{Engine, Options, Semantics};
use palisade_gen::strategies::cluster;
use palisade_model::*;
use proptest::prelude::*;

/// What to change in a generated cluster to reach the cases its strategy does not make.
#[derive(Debug, Clone)]
struct Twists {
    /// Per pod: 0 unchanged, 1 IPv6 only, 2 dual-stack (IPv4 first), 3 dual-stack (IPv6 first).
    families: Vec<u8>,
    /// Give a second pod the first's address.
    shared: Option<(usize, usize)>,
    /// Make this pod a workload's representative, without an address.
    workload: Option<usize>,
    /// Add an IPv6 ipBlock to the first rule with peers of this policy.
    v6_block: Option<usize>,
}

fn twists() -> impl Strategy<Value = Twists> {
    (
        proptest::collection::vec(
            prop_oneof![6 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8), 1 => Just(3u8)],
            6,
        ),
        proptest::option::weighted(0.2, (0..6usize, 0..6usize)),
        proptest::option::weighted(0.15, 0..6usize),
        proptest::option::weighted(0.3, 0..4usize),
    )
        .prop_map(|(families, shared, workload, v6_block)| Twists {
            families,
            shared,
            workload,
            v6_block,
        })
}

fn twist(mut c: Cluster, t: &Twists) -> Cluster {
    for (i, pod) in c.pods.iter_mut().enumerate() {
        if pod.host_network {
            continue;
        }
        let v6: IpAddr = format!("fd00::{}", i + 1).parse().unwrap();
        match t.families.get(i).copied().unwrap_or(0) {
            1 => pod.ips = vec![v6],
            2 => pod.ips.push(v6),
            3 => pod.ips.insert(0, v6),
            _ => {}
        }
    }
    if let Some((a, b)) = t.shared
        && a != b
        && a < c.pods.len()
        && b < c.pods.len()
        && !c.pods[a].host_network
        && !c.pods[b].host_network
    {
        c.pods[b].ips = c.pods[a].ips.clone();
    }
    if let Some(w) = t.workload.filter(|&w| w < c.pods.len()) {
        let pod = &mut c.pods[w];
        pod.name = format!("{}[Deployment]", pod.name);
        pod.ips.clear();
        pod.host_network = false;
    }
    if let Some(np) = t.v6_block.and_then(|i| c.network_policies.get_mut(i)) {
        let block = IpBlock {
            cidr: "fd00::/126".parse().unwrap(),
            except: vec!["fd00::2/128".parse().unwrap()],
        };
        if let Some(peers) = np
            .ingress
            .iter_mut()
            .chain(np.egress.iter_mut())
            .find_map(|r| r.peers.as_mut())
        {
            peers.push(NetworkPolicyPeer::IpBlock(block));
        }
    }
    c.pods
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    c
}

proptest! {
    #![proptest_config(palisade_test_support::proptest_config(600, 0x5eed_2027))]

    #[test]
    fn rows_agree_with_pairs(c in cluster(), t in twists(), legacy in prop::bool::weighted(0.2), node_local in any::<bool>()) {
        let o = Options { semantics: if legacy { Semantics::Legacy } else { Semantics::Standard }, allow_node_local: node_local };
        let engine = Engine::new(twist(c, &t), o);
        let probes: Vec<Probe> = Protocol::ALL
            .iter()
            .flat_map(|&protocol| [79u16, 80, 81].map(|port| Probe { protocol, port }))
            .collect();
        let rows = Analysis::new(&engine).matrix(&probes);
        let pairs = Analysis::new(&engine).matrix_by_pairs(&probes);
        prop_assert_eq!(rows.classes, pairs.classes);
        prop_assert_eq!(&rows.class_of, &pairs.class_of);
        for (pi, probe) in probes.iter().enumerate() {
            for f in 0..rows.pods.len() {
                for to in 0..rows.pods.len() {
                    prop_assert_eq!(
                        rows.allowed(pi, f, to),
                        pairs.allowed(pi, f, to),
                        "{} -> {} {:?}",
                        engine.cluster().pods[rows.pods[f]].key(),
                        engine.cluster().pods[rows.pods[to]].key(),
                        probe
                    );
                }
            }
        }
    }
}

/// The engine of `docs` and its matrix for TCP port 80.
fn tcp_80(docs: &str) -> (Engine, Matrix) {
    let loaded = palisade_model::load_str(docs).unwrap_or_else(|e| panic!("{e}"));
    let engine = Engine::new(loaded.cluster, Options::default());
    let probe = [Probe {
        protocol: Protocol::Tcp,
        port: 80,
    }];
    let m = Analysis::new(&engine).matrix(&probe);
    (engine, m)
}

/// One host-network pod per node (kube-proxy) does not split a workload by node: the
/// node-local exemption is one rule applied per pod, not a class.
#[test]
fn host_network_pods_do_not_split_classes_by_node() {
    let mut docs = String::new();
    for n in 1..=3 {
        docs.push_str(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n{n}}}\nstatus: {{addresses: [{{type: InternalIP, address: 192.168.0.{n}}}]}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: proxy-{n}, namespace: kube-system, labels: {{app: proxy}}}}\nspec: {{nodeName: n{n}, hostNetwork: true}}\nstatus: {{podIP: 192.168.0.{n}}}\n---\n\
             apiVersion: v1\nkind: Pod\nmetadata: {{name: web-{n}, namespace: shop, labels: {{app: web}}}}\nspec: {{nodeName: n{n}}}\nstatus: {{podIP: 10.0.0.{n}}}\n---\n"
        ));
    }
    docs.push_str("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: shop}\nspec: {podSelector: {}}\n");
    let (engine, m) = tcp_80(&docs);
    let row = |ns: &str, name: &str| {
        let p = engine.pod_id(ns, name).unwrap();
        m.pods.iter().position(|&q| q == p).unwrap()
    };
    let webs: Vec<usize> = (1..=3)
        .map(|n| m.class_of[row("shop", &format!("web-{n}"))])
        .collect();
    assert!(
        webs.iter().all(|&c| c == webs[0]),
        "one class for the workload: {webs:?}"
    );
    assert!(m.has_node_local());
    let (proxy1, web1, web2) = (
        row("kube-system", "proxy-1"),
        row("shop", "web-1"),
        row("shop", "web-2"),
    );
    assert!(
        m.allowed(0, proxy1, web1),
        "a node's own address reaches the pods on it"
    );
    assert!(
        !m.allowed(0, proxy1, web2),
        "and no other pod the policy isolates"
    );
    assert!(
        !m.class_allowed(0, m.class_of[proxy1], m.class_of[web1]),
        "by policy: denied"
    );
}

/// Classes with equal admin lists share one walk of the admin tier only where its rules
/// decide alike for every subject: an ingress named port resolves against each subject's
/// own container ports, so two pods alike but for those ports meet the same rule apart.
#[test]
fn an_ingress_named_port_tells_subjects_with_one_admin_list_apart() {
    let pod = |name: &str, port: u16| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: shop, labels: {{app: web}}}}\n\
             spec: {{containers: [{{name: c, ports: [{{name: web, containerPort: {port}}}]}}]}}\n\
             status: {{podIP: 10.0.0.{}}}\n---\n",
            port - 79
        )
    };
    let docs = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: shop}}\n---\n{}{}\
         apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
         metadata: {{name: deny-web}}\nspec: {{priority: 1, subject: {{namespaces: {{}}}}, \
         ingress: [{{name: r, action: Deny, from: [{{namespaces: {{}}}}], ports: [{{namedPort: web}}]}}]}}\n",
        pod("on-80", 80),
        pod("on-81", 81),
    );
    let (engine, m) = tcp_80(&docs);
    let row = |name: &str| {
        let p = engine.pod_id("shop", name).unwrap();
        m.pods.iter().position(|&q| q == p).unwrap()
    };
    let (on_80, on_81) = (row("on-80"), row("on-81"));
    assert_ne!(m.class_of[on_80], m.class_of[on_81]);
    assert!(!m.allowed(0, on_81, on_80), "port 80 is named web on on-80");
    assert!(m.allowed(0, on_80, on_81), "and not on on-81");
}
