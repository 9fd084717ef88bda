//! CIDR arithmetic: a block minus its exceptions, as the fewest prefixes.

use ipnet::IpNet;

/// `cidr` minus the union of `except`, as the minimal set of prefixes covering exactly the
/// remaining addresses, in address order ("1.1.1.0/24 except 1.1.1.0/26" gives
/// 1.1.1.64/26 and 1.1.1.128/25).
pub fn subtract(cidr: IpNet, except: &[IpNet]) -> Vec<IpNet> {
    let mut out = Vec::new();
    split(cidr.trunc(), except, &mut out);
    out
}

fn split(net: IpNet, except: &[IpNet], out: &mut Vec<IpNet>) {
    if except.iter().any(|e| e.contains(&net)) {
        return; // entirely excluded
    }
    if !except.iter().any(|e| net.contains(e)) {
        out.push(net); // untouched by any exception
        return;
    }
    // An exception lies strictly inside: the halves are the next candidates.
    if let Ok(halves) = net.subnets(net.prefix_len() + 1) {
        for half in halves {
            split(half, except, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn nets(v: &[&str]) -> Vec<IpNet> {
        v.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn the_kuryr_design_examples() {
        let got = subtract("1.1.1.0/24".parse().unwrap(), &nets(&["1.1.1.0/26"]));
        assert_eq!(got, nets(&["1.1.1.64/26", "1.1.1.128/25"]));
        let got = subtract("172.17.0.0/16".parse().unwrap(), &nets(&["172.17.1.0/24"]));
        assert_eq!(
            got,
            nets(&[
                "172.17.0.0/24",
                "172.17.2.0/23",
                "172.17.4.0/22",
                "172.17.8.0/21",
                "172.17.16.0/20",
                "172.17.32.0/19",
                "172.17.64.0/18",
                "172.17.128.0/17",
            ])
        );
        let got = subtract("2001:db8::/32".parse().unwrap(), &nets(&["2001:db8::/34"]));
        assert_eq!(got, nets(&["2001:db8:4000::/34", "2001:db8:8000::/33"]));
        assert!(subtract("10.0.0.0/8".parse().unwrap(), &nets(&["10.0.0.0/8"])).is_empty());
    }

    proptest! {
        #![proptest_config(palisade_test_support::proptest_config(ProptestConfig::default().cases, 0x5eed_2026))]

        /// Exactly the right addresses, with no two prefixes that could merge.
        #[test]
        fn subtraction_is_exact_and_minimal(base in 16u8..=24, ex in proptest::collection::vec((0u32..256, 24u8..=30), 0..4), probes in proptest::collection::vec(0u32..65536, 50)) {
            let cidr: IpNet = format!("10.1.0.0/{base}").parse().unwrap();
            let except: Vec<IpNet> = ex.iter().map(|(o, len)| IpNet::new(std::net::Ipv4Addr::from(0x0a01_0000 + (o << 8)).into(), *len).unwrap().trunc()).collect();
            let parts = subtract(cidr, &except);
            for p in probes {
                let ip: std::net::IpAddr = std::net::Ipv4Addr::from(0x0a01_0000 + p).into();
                let want = cidr.contains(&ip) && !except.iter().any(|e| e.contains(&ip));
                prop_assert_eq!(parts.iter().any(|n| n.contains(&ip)), want);
            }
            for w in parts.windows(2) {
                prop_assert!(w[0].supernet() != w[1].supernet() || w[0].supernet().is_none(), "{:?} and {:?} merge", w[0], w[1]);
            }
        }
    }
}
