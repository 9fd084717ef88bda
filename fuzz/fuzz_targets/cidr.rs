//! CIDR minus excepts, the same everywhere: `IpBlock::contains`, the Neutron subtraction
//! (disjoint prefixes inside the CIDR covering exactly the allowed addresses), the engine
//! (an ipBlock ingress rule) and the nftables ruleset interpreted in userspace.
#![no_main]

use std::net::IpAddr;

use arbitrary::Arbitrary;
use ipnet::IpNet;
use libfuzzer_sys::fuzz_target;
use palisade_engine::{Engine, Flow};
use palisade_model::*;
use palisade_nft::{NftVerdict, Packet};

#[derive(Arbitrary, Debug)]
struct Net {
    addr: u128,
    prefix: u8,
}

#[derive(Arbitrary, Debug)]
struct Input {
    v6: bool,
    cidr: Net,
    except: Vec<Net>,
    probes: Vec<u128>,
}

fn addr(v6: bool, a: u128) -> IpAddr {
    if v6 {
        IpAddr::from(a.to_be_bytes())
    } else {
        IpAddr::from((a as u32).to_be_bytes())
    }
}

fn net(v6: bool, n: &Net) -> IpNet {
    let max = if v6 { 128 } else { 32 };
    IpNet::new(addr(v6, n.addr), n.prefix % (max + 1))
        .expect("prefix in range")
        .trunc()
}

fn bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fuzz_target!(|input: Input| {
    let v6 = input.v6;
    let cidr = net(v6, &input.cidr);
    let except: Vec<IpNet> = input.except.iter().take(6).map(|n| net(v6, n)).collect();
    let block = IpBlock {
        cidr,
        except: except.clone(),
    };
    let parts = palisade_neutron::subtract(cidr, &except);
    for (i, a) in parts.iter().enumerate() {
        assert!(cidr.contains(a), "{a} outside {cidr}");
        for b in &parts[i + 1..] {
            assert!(!a.contains(b) && !b.contains(a), "{a} and {b} overlap");
        }
    }
    // Probes: the fuzzer's, and the edges of every prefix involved.
    let mut probes: Vec<IpAddr> = input.probes.iter().take(8).map(|&a| addr(v6, a)).collect();
    for n in std::iter::once(&cidr).chain(&except).chain(&parts) {
        let (lo, hi) = (bits(n.network()), bits(n.broadcast()));
        for b in [lo, hi, lo.wrapping_sub(1), hi.wrapping_add(1)] {
            probes.push(addr(v6, b));
        }
    }
    let want = |ip: &IpAddr| cidr.contains(ip) && !except.iter().any(|e| e.contains(ip));
    for ip in &probes {
        assert_eq!(block.contains(ip), want(ip), "IpBlock::contains({ip})");
        assert_eq!(
            parts.iter().any(|p| p.contains(ip)),
            want(ip),
            "subtract covers {ip}"
        );
    }

    // The same block as an ingress rule of a pod whose address is outside every probe.
    let pod_ip: IpAddr = if v6 {
        "fd00:ffff::1".parse().expect("ip")
    } else {
        [100, 64, 0, 1].into()
    };
    let cluster = Cluster {
        namespaces: vec![Namespace {
            name: "ns".into(),
            labels: [(NAMESPACE_NAME_LABEL.to_string(), "ns".to_string())].into(),
            default_deny_ingress: false,
            origin: None,
        }],
        nodes: vec![],
        pods: vec![Pod {
            namespace: "ns".into(),
            name: "p".into(),
            labels: Labels::new(),
            node_name: None,
            host_network: false,
            ips: vec![pod_ip],
            ports: vec![],
            origin: Origin::default(),
        }],
        network_policies: vec![NetworkPolicy {
            namespace: "ns".into(),
            name: "block".into(),
            api: NetworkPolicyApi::V1,
            pod_selector: Selector::everything(),
            policy_types: PolicyTypes {
                ingress: true,
                egress: false,
            },
            ingress: vec![NetworkPolicyRule {
                ports: None,
                peers: Some(vec![NetworkPolicyPeer::IpBlock(block)]),
            }],
            egress: vec![],
            origin: Origin::default(),
        }],
        admin_policies: vec![],
        staged: Default::default(),
    };
    let engine = Engine::new(cluster, Default::default());
    let ruleset = palisade_nft::compile(&engine, None).expect("compiles");
    let dst = engine.endpoint_for_ip(pod_ip);
    for ip in probes.iter().filter(|ip| **ip != pod_ip) {
        let flow = Flow {
            src: engine.endpoint_for_ip(*ip),
            dst,
            protocol: Protocol::Tcp,
            port: 80,
        };
        assert_eq!(engine.evaluate(&flow).allowed, want(ip), "engine on {ip}");
        let p = Packet {
            src: *ip,
            dst: pod_ip,
            protocol: Protocol::Tcp,
            dport: 80,
        };
        assert_eq!(
            ruleset.lookup(&p) == NftVerdict::Accept,
            want(ip),
            "nft on {ip}"
        );
    }
    palisade_fuzz::check_nft_text(&ruleset.render()).expect("nft text");
});
