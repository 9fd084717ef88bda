//! The address ranges behind `allowed_local` and `allowed_internet`.

/// `allowed_local`: the private address ranges (RFC 1918 and IPv6 unique local, RFC 4193).
pub const LOCAL: &[&str] = &["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"];

/// `allowed_internet`, IPv4: everything except the special-purpose ranges of the IANA
/// registry (RFC 6890 and successors): "this network", private, CGNAT, loopback,
/// link-local (including the 169.254.169.254 metadata address), IETF protocol assignments,
/// documentation, 6to4 relay, benchmarking, multicast and reserved (with broadcast).
pub const INTERNET_V4: (&str, &[&str]) = (
    "0.0.0.0/0",
    &[
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ],
);

/// `allowed_internet`, IPv6: global unicast (2000::/3) except IETF protocol assignments
/// (2001::/23, which holds Teredo and ORCHIDs), documentation (2001:db8::/32, 3fff::/20)
/// and 6to4 (2002::/16). Everything outside 2000::/3 — loopback, IPv4-mapped, NAT64,
/// unique local, link-local, multicast — is not public.
pub const INTERNET_V6: (&str, &[&str]) = (
    "2000::/3",
    &["2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20"],
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excepts_are_strictly_inside() {
        for (cidr, except) in [INTERNET_V4, INTERNET_V6] {
            let c: ipnet::IpNet = cidr.parse().unwrap();
            for e in except {
                let e: ipnet::IpNet = e.parse().unwrap();
                assert!(
                    c.contains(&e) && e.prefix_len() > c.prefix_len(),
                    "{e} in {c}"
                );
            }
        }
    }
}
