//! The nftables renderer: any loadable cluster compiles (for every node and for all pods),
//! the rendered script contains only Palisade's vocabulary (no input text outside escaped
//! comments), incremental update scripts likewise, and the ruleset interpreted in
//! userspace decides every pod-to-pod probe as the engine does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_engine::Flow;
use palisade_nft::{NftVerdict, Packet, Ruleset};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = palisade_fuzz::load_both(text);
    let Some(engine) = palisade_fuzz::small_engine(loaded.cluster, Default::default()) else {
        return;
    };
    let cluster = engine.cluster();
    let mut nodes: Vec<Option<&str>> = vec![None];
    nodes.extend(cluster.nodes.iter().take(3).map(|n| Some(n.name.as_str())));
    for node in nodes {
        let rs = match palisade_nft::compile(&engine, node) {
            Ok(rs) => rs,
            Err(e) => panic!("compile for {node:?} failed: {e}"),
        };
        let script = rs.render();
        if let Err(e) = palisade_fuzz::check_nft_text(&script) {
            panic!("{e}\n{script}");
        }
        let (update, _) = palisade_nft::update_script(&Ruleset::default(), &rs);
        if let Err(e) = palisade_fuzz::check_nft_text(&update) {
            panic!("update script: {e}\n{update}");
        }
        let _ = rs.log_prefixes().count();
        if node.is_some() {
            continue;
        }
        // Pods with two or more addresses in one family, and duplicate addresses, are
        // left to the model's validation; compare where each address names one pod.
        let ips = palisade_fuzz::addresses(cluster);
        let owners = |ip: &std::net::IpAddr| palisade_fuzz::owners(cluster, ip);
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
                    let got = rs.lookup(&Packet {
                        src,
                        dst,
                        protocol: probe.protocol,
                        dport: probe.port,
                    }) == NftVerdict::Accept;
                    assert_eq!(
                        got,
                        want,
                        "{src} -> {dst} {probe:?}\n{}\n{script}",
                        engine.explain(&flow)
                    );
                }
            }
        }
    }
});
