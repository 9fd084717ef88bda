//! Shared fixture: the upstream e2e model (namespaces x, y, z; pods a, b, c; ports 80 and 81
//! on TCP, UDP and SCTP) and a matrix checker that reports every wrong cell.

#![allow(dead_code, missing_docs, clippy::unwrap_used)] // shared by several test binaries, each using a part

use palisade_analysis::{Analysis, Probe};
use palisade_engine::{Engine, Flow, Options, Verdict};
use palisade_model::Protocol;

/// The bundled e2e-model cluster.
pub const CLUSTER: &str = include_str!("../../../../examples/xyz/cluster.yaml");

/// Compiles the e2e model plus `policies` (YAML).
pub fn engine(policies: &str) -> Engine {
    engine_with(policies, Options::default())
}

/// As [`engine`], with options.
pub fn engine_with(policies: &str, options: Options) -> Engine {
    let loaded = palisade_model::load_sources(
        [("cluster.yaml", CLUSTER), ("policies.yaml", policies)],
        palisade_model::LoadOptions::default(),
    )
    .unwrap_or_else(|e| match e {
        palisade_model::LoadError::Invalid(d) => panic!("invalid fixture: {d:#?}"),
        other => panic!("{other}"),
    });
    Engine::new(loaded.cluster, options)
}

pub const TCP80: Probe = Probe {
    protocol: Protocol::Tcp,
    port: 80,
};
pub const TCP81: Probe = Probe {
    protocol: Protocol::Tcp,
    port: 81,
};
pub const UDP80: Probe = Probe {
    protocol: Protocol::Udp,
    port: 80,
};
pub const UDP81: Probe = Probe {
    protocol: Protocol::Udp,
    port: 81,
};
pub const SCTP80: Probe = Probe {
    protocol: Protocol::Sctp,
    port: 80,
};

/// Asserts the whole pod-to-pod matrix for `probe`: `expect(from, to)` with names like "x/a".
/// Pod-to-self is always expected allowed.
pub fn assert_matrix(engine: &Engine, probe: Probe, expect: impl Fn(&str, &str) -> bool) {
    let m = Analysis::new(engine).matrix(&[probe]);
    let names: Vec<String> = m
        .pods
        .iter()
        .map(|&p| engine.cluster().pods[p].key())
        .collect();
    assert_eq!(names.len(), 9, "the e2e model has 9 pods");
    let mut wrong = Vec::new();
    for (f, from) in names.iter().enumerate() {
        for (t, to) in names.iter().enumerate() {
            let want = from == to || expect(from, to);
            let got = m.allowed(0, f, t);
            if want != got {
                let flow = Analysis::new(engine)
                    .pod_flow(m.pods[f], m.pods[t], probe)
                    .unwrap();
                wrong.push(format!(
                    "{from} -> {to} {}/{}: want {want}, got {got}\n{}",
                    probe.protocol,
                    probe.port,
                    Analysis::new(engine).explain(&flow)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong cells:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The flow between two pods named "ns/name".
pub fn flow(engine: &Engine, from: &str, to: &str, probe: Probe) -> Flow {
    let id = |s: &str| {
        let (ns, n) = s.split_once('/').unwrap();
        engine.pod_id(ns, n).unwrap()
    };
    Analysis::new(engine)
        .pod_flow(id(from), id(to), probe)
        .unwrap()
}

/// Evaluates a pod-to-pod flow.
pub fn eval(engine: &Engine, from: &str, to: &str, probe: Probe) -> Verdict {
    engine.evaluate(&flow(engine, from, to, probe))
}

/// Evaluates a flow from a pod to an address.
pub fn eval_to_ip(engine: &Engine, from: &str, ip: &str, probe: Probe) -> Verdict {
    let (ns, n) = from.split_once('/').unwrap();
    let src = engine
        .endpoint_for_pod(engine.pod_id(ns, n).unwrap(), None)
        .unwrap();
    let dst = engine.endpoint_for_ip(ip.parse().unwrap());
    engine.evaluate(&Flow {
        src,
        dst,
        protocol: probe.protocol,
        port: probe.port,
    })
}

/// Evaluates a flow from an address to a pod.
pub fn eval_from_ip(engine: &Engine, ip: &str, to: &str, probe: Probe) -> Verdict {
    let (ns, n) = to.split_once('/').unwrap();
    let dst = engine
        .endpoint_for_pod(engine.pod_id(ns, n).unwrap(), None)
        .unwrap();
    let src = engine.endpoint_for_ip(ip.parse().unwrap());
    engine.evaluate(&Flow {
        src,
        dst,
        protocol: probe.protocol,
        port: probe.port,
    })
}

/// "x" of "x/a".
pub fn ns(pod: &str) -> &str {
    pod.split('/').next().unwrap()
}

/// "a" of "x/a".
pub fn name(pod: &str) -> &str {
    pod.split('/').nth(1).unwrap()
}

/// A one-line description of a side's deciding policy, for assertions.
pub fn decided_by(side: &palisade_engine::SideVerdict) -> String {
    match &side.decision {
        palisade_engine::Decision::Rule(m) => {
            format!("{} {} rule {}", side.tier.as_str(), m.policy, m.index)
        }
        d => format!("{} {:?}", side.tier.as_str(), d),
    }
}

/// A second address, in IPv6, for every pod and node (host-network pods take their
/// node's), and IPv6 ipBlocks in front of every policy's peers.
pub fn dual_stack(mut c: palisade_model::Cluster, v6_rules: bool) -> palisade_model::Cluster {
    let v6 = |ip: std::net::IpAddr| -> std::net::IpAddr {
        match ip {
            std::net::IpAddr::V4(a) => {
                let [_, _, x, y] = a.octets();
                std::net::IpAddr::from([0xfd00, 0, 0, 0, 0, 0, u16::from(x), u16::from(y)])
            }
            v6 => v6,
        }
    };
    for p in &mut c.pods {
        let extra: Vec<std::net::IpAddr> = p.ips.iter().map(|ip| v6(*ip)).collect();
        p.ips.extend(extra);
    }
    for n in &mut c.nodes {
        let extra: Vec<std::net::IpAddr> = n.addresses.iter().map(|ip| v6(*ip)).collect();
        n.addresses.extend(extra);
    }
    if v6_rules {
        for np in &mut c.network_policies {
            for r in np.ingress.iter_mut().chain(np.egress.iter_mut()) {
                if let Some(peers) = &mut r.peers {
                    peers.push(palisade_model::NetworkPolicyPeer::IpBlock(
                        palisade_model::IpBlock {
                            cidr: "fd00::/112".parse().unwrap(),
                            except: vec!["fd00::3/128".parse().unwrap()],
                        },
                    ));
                }
            }
        }
    }
    c
}
