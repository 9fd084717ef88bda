//! The Neutron translator: any loadable cluster's NetworkPolicies translate in both peer
//! modes; group names are unique and within Neutron's 255 characters; the translation
//! serializes; and the security groups decide every probe as the engine does.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use palisade_engine::{Flow, Options};
use palisade_neutron::{PeerMode, SgEvaluator, TranslateOptions, translate};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut cluster = palisade_fuzz::load_both(text).cluster;
    // Security groups express NetworkPolicies only.
    cluster.admin_policies.clear();
    let Some(engine) = palisade_fuzz::small_engine(cluster, Options::default()) else {
        return;
    };
    let cluster = engine.cluster();
    let ips = palisade_fuzz::addresses(cluster);
    let owners = |ip: &std::net::IpAddr| palisade_fuzz::owners(cluster, ip);
    for peer_mode in [PeerMode::Prefixes, PeerMode::RemoteGroups] {
        let options = TranslateOptions {
            peer_mode,
            ignore_admin_policies: false,
        };
        let (t, _) = match translate(&engine, &options) {
            Ok(t) => t,
            Err(e) => panic!("translation refused: {e}"),
        };
        let mut names = BTreeSet::new();
        for g in &t.security_groups {
            assert!(
                g.name.len() <= 255,
                "group name longer than 255: {}",
                g.name
            );
            assert!(names.insert(g.name.clone()), "two groups named {}", g.name);
        }
        let json = serde_json::to_string(&t).expect("serializes");
        let _: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        let sg = SgEvaluator::new(&t);
        for probe in palisade_fuzz::probes(&engine) {
            for &src in ips.iter().filter(|i| owners(i) <= 1) {
                for &dst in ips
                    .iter()
                    .filter(|i| owners(i) <= 1 && i.is_ipv4() == src.is_ipv4())
                {
                    let flow = Flow {
                        src: engine.endpoint_for_ip(src),
                        dst: engine.endpoint_for_ip(dst),
                        protocol: probe.protocol,
                        port: probe.port,
                    };
                    let want = engine.evaluate(&flow).allowed;
                    let got = sg.allows(src, dst, probe.protocol, probe.port);
                    assert_eq!(
                        got,
                        want,
                        "{peer_mode:?}: {src} -> {dst} {probe:?}\n{}",
                        engine.explain(&flow)
                    );
                }
            }
        }
    }
});
