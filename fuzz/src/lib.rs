//! Checks shared by Palisade's fuzz targets: bounded loading and evaluation, the lexical
//! check of rendered nftables text, and reference implementations of the API server's
//! name rules to compare the validators with.
//!
//! Every function panics (a fuzzing finding) when an invariant does not hold, with a
//! message that says which one.

use std::collections::BTreeMap;
use std::net::IpAddr;

use palisade_engine::{Engine, Flow, Options, Probe};
use palisade_model::{Cluster, LoadError, LoadOptions, Loaded, Protocol, Severity};

/// Inputs with more pods than this are loaded but not evaluated pairwise (keeps each run
/// fast enough for the fuzzer to explore).
pub const MAX_PODS: usize = 24;

/// Loads one text as a manifest file.
pub fn load(text: &str, skip_invalid: bool) -> Result<Loaded, LoadError> {
    palisade_model::load_sources([("input.yaml", text)], LoadOptions { skip_invalid })
}

/// Loads `text` strictly and with `skip_invalid`, checks that the two agree, and returns
/// the lenient result (empty for an input with nothing to load, which both refuse alike).
pub fn load_both(text: &str) -> Loaded {
    let strict = load(text, false);
    let lenient = match load(text, true) {
        Ok(l) => l,
        // Nothing to read (no document, or no object of a kind Palisade reads, and nothing
        // invalid) is refused with one error, with or without skipping.
        Err(LoadError::Invalid(diags)) => {
            assert_eq!(diags.len(), 1, "skip_invalid refused more than an empty input: {diags:?}");
            match &strict {
                Err(LoadError::Invalid(same)) => assert_eq!(same, &diags),
                _ => panic!("skip_invalid refused what strict loading accepted: {diags:?}"),
            }
            return Loaded::default();
        }
        Err(e) => panic!("skip_invalid loading failed: {e}"),
    };
    match &strict {
        Ok(s) => assert_eq!(
            format!("{:?}", s.cluster),
            format!("{:?}", lenient.cluster),
            "a valid input must load the same with and without skip_invalid"
        ),
        Err(LoadError::Invalid(diags)) => {
            assert!(
                diags.iter().any(|d| d.severity == Severity::Error),
                "an invalid input must report at least one error"
            );
            assert!(
                lenient
                    .diagnostics
                    .iter()
                    .any(|d| d.severity == Severity::Error),
                "skip_invalid must report what it skipped"
            );
        }
        Err(e) => panic!("in-memory loading cannot fail with I/O: {e}"),
    }
    lenient
}

/// Compiles a cluster if it is small enough to evaluate pairwise.
pub fn small_engine(cluster: Cluster, options: Options) -> Option<Engine> {
    (cluster.pods.len() <= MAX_PODS
        && cluster.network_policies.len() + cluster.admin_policies.len() <= 64)
        .then(|| Engine::new(cluster, options))
}

/// The probes to try: the pods' container ports (at most four) and TCP/80.
pub fn probes(engine: &Engine) -> Vec<Probe> {
    let mut p: Vec<Probe> = engine.container_probes().into_iter().take(4).collect();
    p.push(Probe {
        protocol: Protocol::Tcp,
        port: 80,
    });
    p.sort();
    p.dedup();
    p
}

/// A few addresses outside any cluster, both families.
pub fn outside_addresses() -> [IpAddr; 4] {
    [
        IpAddr::from([203, 0, 113, 7]),
        IpAddr::from([10, 0, 0, 1]),
        "2001:db8::7".parse().unwrap_or(IpAddr::from([0u16; 8])),
        IpAddr::from([0, 0, 0, 0]),
    ]
}

/// Evaluates every pod pair (and pod ↔ outside address) on every probe: verdicts are
/// consistent (allowed iff both sides allow), explanations render, and the matrix agrees
/// with one-by-one evaluation.
pub fn exercise(engine: &Engine) {
    let probes = probes(engine);
    let matrix = engine.matrix(&probes);
    for (pi, &probe) in probes.iter().enumerate() {
        for (f, &from) in matrix.pods.iter().enumerate() {
            for (t, &to) in matrix.pods.iter().enumerate() {
                let Some(flow) = engine.pod_flow(from, to, probe) else {
                    continue;
                };
                let v = engine.evaluate(&flow);
                assert_eq!(
                    v.allowed,
                    v.egress.allowed && v.ingress.allowed,
                    "allowed iff both sides allow"
                );
                if from != to {
                    assert_eq!(
                        matrix.allowed(pi, f, t),
                        v.allowed,
                        "matrix and evaluate disagree on {from} -> {to} {probe:?}\n{}",
                        engine.explain(&flow)
                    );
                }
                let _ = engine.explain(&flow);
            }
        }
        for (pod, endpoint) in engine.addressable_pods() {
            let _ = pod;
            for ip in outside_addresses() {
                for (src, dst) in [
                    (endpoint, engine.endpoint_for_ip(ip)),
                    (engine.endpoint_for_ip(ip), endpoint),
                ] {
                    let flow = Flow {
                        src,
                        dst,
                        protocol: probe.protocol,
                        port: probe.port,
                    };
                    let v = engine.evaluate(&flow);
                    assert_eq!(v.allowed, v.egress.allowed && v.ingress.allowed);
                    let _ = engine.explain(&flow);
                }
            }
        }
    }
}

/// Every address the cluster knows (pods and nodes) plus a few outside ones, sorted.
pub fn addresses(cluster: &Cluster) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = cluster.pods.iter().flat_map(|p| p.ips.clone()).collect();
    ips.extend(cluster.nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.extend(outside_addresses());
    ips.sort();
    ips.dedup();
    ips
}

/// How many endpoints `ip` names: non-host-network pods holding it, plus its node (a node
/// and the host-network pods on it count once). Comparisons are made where this is at most 1.
pub fn owners(cluster: &Cluster, ip: &IpAddr) -> usize {
    let pods = cluster
        .pods
        .iter()
        .filter(|p| !p.host_network && p.ips.contains(ip))
        .count();
    let hosts = cluster
        .nodes
        .iter()
        .filter(|n| n.addresses.contains(ip))
        .count();
    let host_pods = cluster
        .pods
        .iter()
        .any(|p| p.host_network && p.ips.contains(ip));
    pods + hosts.max(usize::from(host_pods))
}

// ---------------------------------------------------------------------------------------
// nftables text

/// The words a rendered ruleset may contain besides addresses, numbers and generated names.
const NFT_WORDS: &[&str] = &[
    "add",
    "delete",
    "flush",
    "table",
    "inet",
    "palisade",
    "map",
    "set",
    "chain",
    "rule",
    "element",
    "type",
    "ipv4_addr",
    "ipv6_addr",
    ":",
    "verdict",
    "elements",
    "=",
    "{",
    "}",
    "flags",
    "interval",
    "hook",
    "forward",
    "input",
    "output",
    "priority",
    "filter",
    "policy",
    "accept",
    "drop",
    "return",
    "jump",
    "goto",
    "ct",
    "state",
    "established,related",
    "invalid",
    "ip",
    "ip6",
    "saddr",
    "daddr",
    "vmap",
    "@egress4",
    "@egress6",
    "@ingress4",
    "@ingress6",
    "egress4",
    "egress6",
    "ingress4",
    "ingress6",
    "@egress_exempt4",
    "@egress_exempt6",
    "@ingress_exempt4",
    "@ingress_exempt6",
    "egress_exempt4",
    "egress_exempt6",
    "ingress_exempt4",
    "ingress_exempt6",
    ".",
    "meta",
    "l4proto",
    "tcp",
    "udp",
    "sctp",
    "th",
    "dport",
    "!=",
    "&",
    "(fin|syn|rst|ack)",
    "syn",
    "counter",
    "log",
    "prefix",
    "group",
    "comment",
    "QUOTED",
];

/// Whether `w` is a name the nft compiler generates (digests, never user text): class
/// chains `e<12 hex>[x…]` / `i…`, program chains `a…` / `n…` / `b…` likewise, sets
/// `s4[i]<12 hex>[_<12 hex>][x…]` / `s6…`.
fn generated_name(w: &str) -> bool {
    let w = w.strip_prefix('@').unwrap_or(w);
    let hex12 = |s: &str| {
        s.len() >= 12
            && s[..12]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    let digest_then_x = |s: &str| hex12(s) && s[12..].bytes().all(|b| b == b'x');
    if let Some(rest) = w.strip_prefix("s4").or_else(|| w.strip_prefix("s6")) {
        let rest = rest.strip_prefix('i').unwrap_or(rest);
        return match rest.split_once('_') {
            Some((a, b)) => a.len() == 12 && hex12(a) && digest_then_x(b),
            None => digest_then_x(rest),
        };
    }
    let Some(rest) = ['e', 'i', 'a', 'n', 'b']
        .iter()
        .find_map(|&p| w.strip_prefix(p))
    else {
        return false;
    };
    digest_then_x(rest)
}

fn number_or_range(w: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    match w.split_once('-') {
        Some((a, b)) => digits(a) && digits(b),
        None => digits(w),
    }
}

/// Replaces every double-quoted string of a line with `QUOTED`, checking that it is a log
/// prefix `"pal-<n> "` or a properly escaped comment. Returns the line, or why it is bad.
fn strip_quotes(line: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('"') {
        out.push_str(&rest[..start]);
        let body_start = start + 1;
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest[body_start..].char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(body_start + i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            return Err(format!("unterminated string in {line:?}"));
        };
        let body = &rest[body_start..end];
        let before = out.trim_end();
        let is_log = before.ends_with("prefix")
            && body
                .strip_prefix("pal-")
                .and_then(|b| b.strip_suffix(' '))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let is_comment = before.ends_with("comment") && body.chars().all(|c| !c.is_control());
        if !is_log && !is_comment {
            return Err(format!(
                "a string that is neither a log prefix nor a comment: {line:?}"
            ));
        }
        out.push_str("QUOTED");
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Checks that an `nft -f` script holds only Palisade's own vocabulary: keywords,
/// addresses, numbers and generated names; strings only as log prefixes and escaped
/// comments. Returns the first offending line.
pub fn check_nft_text(script: &str) -> Result<(), String> {
    for line in script.lines() {
        if line.contains('#') {
            return Err(format!("a comment in {line:?}"));
        }
        let line = strip_quotes(line)?;
        for word in line.split_whitespace() {
            let w = word.trim_end_matches([',', ';']);
            if w.is_empty()
                || NFT_WORDS.contains(&w)
                || number_or_range(w)
                || generated_name(w)
                || w.parse::<IpAddr>().is_ok()
                || w.parse::<ipnet::IpNet>().is_ok()
            {
                continue;
            }
            return Err(format!("unexpected word {w:?} in {line:?}"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Reference implementations of apimachinery's validation (k8s.io/apimachinery/pkg/util/validation)

fn dns1123_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// `IsDNS1123Label`: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
pub fn ref_dns_label(s: &str) -> bool {
    s.len() <= 63 && dns1123_label_shape(s)
}

/// `IsDNS1123Subdomain`: `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`,
/// at most 253 characters (no limit per dot-separated part).
pub fn ref_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns1123_label_shape)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

/// `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123 subdomain, name ≤ 63 characters.
pub fn ref_qualified_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return false,
    };
    prefix.is_none_or(|p| !p.is_empty() && ref_dns_subdomain(p))
        && name.len() <= 63
        && qualified_name_part(name)
}

/// `IsValidLabelValue`: empty, or ≤ 63 characters of the qualified-name alphabet.
pub fn ref_label_value(s: &str) -> bool {
    s.is_empty() || (s.len() <= 63 && qualified_name_part(s))
}

/// `IsValidPortName`: 1–15 of `[-a-z0-9]`, a letter, no `--`, no hyphen at either end.
pub fn ref_port_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 15
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && !s.contains("--")
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Go's `net.ParseCIDR` on the parts it is strict about: the prefix length is decimal
/// digits only, and IPv4 fields are decimal without leading zeros. `None` when the
/// address part is IPv6 without an embedded IPv4 (left to the Rust parser).
pub fn ref_cidr_shape(s: &str) -> Option<bool> {
    let (addr, prefix) = s.split_once('/')?;
    let digits_ok = !prefix.is_empty() && prefix.bytes().all(|b| b.is_ascii_digit());
    let v4 = addr.rsplit(':').next().unwrap_or_default();
    if !v4.contains('.') {
        return (!digits_ok).then_some(false);
    }
    let fields_ok = v4.split('.').count() == 4
        && v4.split('.').all(|f| {
            !f.is_empty()
                && f.len() <= 3
                && f.bytes().all(|b| b.is_ascii_digit())
                && !(f.len() > 1 && f.starts_with('0'))
                && f.parse::<u16>().is_ok_and(|n| n <= 255)
        });
    if !digits_ok || !fields_ok {
        return Some(false);
    }
    None
}

/// A label map from pairs (later pairs win).
pub fn label_map<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nft_lexer_accepts_generated_text_and_rejects_user_text() {
        assert!(check_nft_text("add table inet palisade\n  chain a0123456789ab {\n    ip saddr @s4aaaaaaaaaaaa counter log prefix \"pal-3 \" group 100 drop\n  }\n").is_ok());
        assert!(check_nft_text("    ip saddr 10.0.0.0/8 th dport { 80-81, 443 } return\n").is_ok());
        assert!(check_nft_text("    tcp flags & (fin|syn|rst|ack) != syn drop\n").is_ok());
        assert!(
            check_nft_text("    ip saddr . ip daddr != @egress_exempt4 ip saddr vmap @egress4\n")
                .is_ok()
        );
        assert!(
            check_nft_text("    ip daddr @s4i0123456789ab_0123456789abx goto n0123456789ab\n")
                .is_ok()
        );
        assert!(check_nft_text("  set s4ievil {\n").is_err());
        assert!(check_nft_text("  chain evil {\n").is_err());
        assert!(check_nft_text("  log prefix \"x\" drop\n").is_err());
        assert!(check_nft_text("  drop # hi\n").is_err());
    }

    #[test]
    fn references() {
        assert!(ref_dns_subdomain(&format!("{}.b", "a".repeat(70))));
        assert!(!ref_dns_label(&"a".repeat(64)));
        assert!(ref_qualified_name("kubernetes.io/metadata.name"));
        assert!(!ref_qualified_name("a/b/c"));
        assert!(ref_port_name("http"));
        assert_eq!(ref_cidr_shape("10.0.0.0/+8"), Some(false));
        assert_eq!(ref_cidr_shape("010.0.0.0/8"), Some(false));
        assert_eq!(ref_cidr_shape("10.0.0.0/8"), None);
    }
}
