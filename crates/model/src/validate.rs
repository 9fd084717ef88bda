//! The API server's syntax rules for names, labels, selectors, ports and CIDRs.

use std::collections::BTreeMap;

use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::diag::{Ctx, index, join};
use crate::types::{Port, Protocol, Requirement, Selector, SelectorOp};

const QUALIFIED_NAME_HELP: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
}

/// Errors of a DNS-1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters).
pub fn dns_label(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-';
    (!ok).then(|| {
        format!("invalid value {s:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', start and end with an alphanumeric character, and be at most 63 characters")
    })
}

/// Errors of a DNS-1123 subdomain (apimachinery `IsDNS1123Subdomain`: dot-separated parts
/// of `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 253 characters in all; a part may be longer
/// than 63). The names of Pods, Nodes, NetworkPolicies and the admin policies are subdomains;
/// namespace names are labels ([`dns_label`]).
pub fn dns_subdomain(s: &str) -> Option<String> {
    let part_ok = |p: &str| {
        let b = p.as_bytes();
        !b.is_empty()
            && b.iter()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            && b[0] != b'-'
            && b[b.len() - 1] != b'-'
    };
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(part_ok);
    (!ok).then(|| {
        format!("invalid value {s:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', must start and end with an alphanumeric character, and be at most 253 characters")
    })
}

/// Errors of a qualified name (a label key: optional DNS subdomain prefix and `/`, then a name of ≤63 characters).
pub fn qualified_name(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some(format!(
                "invalid label key {s:?}: prefix part must be non-empty"
            ));
        }
        if let Some(e) = dns_subdomain(p) {
            return Some(format!("invalid label key {s:?}: prefix part {e}"));
        }
    }
    if name.is_empty() {
        return Some(format!(
            "invalid label key {s:?}: name part must be non-empty"
        ));
    }
    if name.len() > 63 {
        return Some(format!(
            "invalid label key {s:?}: name part must be no more than 63 characters"
        ));
    }
    (!is_name_part(name))
        .then(|| format!("invalid label key {s:?}: name part {QUALIFIED_NAME_HELP}"))
}

/// Errors of a label value (empty, or ≤63 characters of the qualified-name alphabet).
pub fn label_value(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    if s.len() > 63 {
        return Some(format!(
            "invalid label value {s:?}: must be no more than 63 characters"
        ));
    }
    (!is_name_part(s))
        .then(|| format!("invalid label value {s:?}: a valid label value {QUALIFIED_NAME_HELP}"))
}

/// Errors of an IANA service name (a container port name).
pub fn port_name(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let problem = if b.is_empty() || b.len() > 15 {
        Some("must be no more than 15 characters")
    } else if !b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    {
        Some("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    } else if !b.iter().any(u8::is_ascii_lowercase) {
        Some("must contain at least one letter (a-z)")
    } else if s.contains("--") {
        Some("must not contain consecutive hyphens")
    } else if b[0] == b'-' || b[b.len() - 1] == b'-' {
        Some("must not begin or end with a hyphen")
    } else {
        None
    };
    problem.map(|p| format!("invalid port name {s:?}: {p}"))
}

/// Validates a map of labels at `path`.
pub(crate) fn labels(ctx: &mut Ctx<'_>, path: &str, map: &BTreeMap<String, String>) {
    for (k, v) in map {
        let p = join(path, k);
        if let Some(e) = qualified_name(k) {
            ctx.error(&p, e);
        }
        if let Some(e) = label_value(v) {
            ctx.error(&p, e);
        }
    }
}

/// Validates and converts a label selector at `path`.
pub(crate) fn selector(ctx: &mut Ctx<'_>, path: &str, sel: &LabelSelector) -> Selector {
    let match_labels = sel.match_labels.clone().unwrap_or_default();
    labels(ctx, &join(path, "matchLabels"), &match_labels);
    let mut expressions = Vec::new();
    for (i, req) in sel.match_expressions.iter().flatten().enumerate() {
        let p = index(&join(path, "matchExpressions"), i);
        if let Some(e) = qualified_name(&req.key) {
            ctx.error(&join(&p, "key"), e);
        }
        let values = req.values.clone().unwrap_or_default();
        for (j, v) in values.iter().enumerate() {
            if let Some(e) = label_value(v) {
                ctx.error(&index(&join(&p, "values"), j), e);
            }
        }
        let op = match req.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                ctx.error(
                    &join(&p, "values"),
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                );
                continue;
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                ctx.error(
                    &join(&p, "values"),
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                );
                continue;
            }
            "In" => SelectorOp::In(values),
            "NotIn" => SelectorOp::NotIn(values),
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                ctx.error(
                    &join(&p, "operator"),
                    format!("Invalid value: {other:?}: not a valid selector operator"),
                );
                continue;
            }
        };
        expressions.push(Requirement {
            key: req.key.clone(),
            op,
        });
    }
    Selector {
        match_labels,
        expressions,
    }
}

/// Parses a protocol at `path`; `None` (absent) is TCP.
pub(crate) fn protocol(ctx: &mut Ctx<'_>, path: &str, p: Option<&str>) -> Protocol {
    match p.map(str::parse::<Protocol>) {
        None => Protocol::Tcp,
        Some(Ok(p)) => p,
        Some(Err(_)) => {
            let v = p.unwrap_or_default();
            ctx.error(
                path,
                format!("Unsupported value: {v:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""),
            );
            Protocol::Tcp
        }
    }
}

/// Parses a port number at `path`.
pub(crate) fn port(ctx: &mut Ctx<'_>, path: &str, n: i64) -> Option<Port> {
    let p = Port::new(n);
    if p.is_none() {
        ctx.error(
            path,
            format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
        );
    }
    p
}

/// Parses a CIDR (Go `net.ParseCIDR` rules; host bits are allowed and cleared).
pub fn parse_cidr(s: &str) -> Result<IpNet, String> {
    // Go rejects IPv4 octets with leading zeros (they were once read as octal).
    let addr = s.split('/').next().unwrap_or_default();
    let v4_part = addr.rsplit(':').next().unwrap_or_default();
    if v4_part.contains('.')
        && v4_part
            .split('.')
            .any(|o| o.len() > 1 && o.starts_with('0'))
    {
        return Err(format!(
            "Invalid value: {s:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        ));
    }
    s.parse::<IpNet>().map(|n| n.trunc()).map_err(|_| {
        format!(
            "Invalid value: {s:?}: must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        )
    })
}

/// Why a CIDR that [`parse_cidr`] reads is in a form the API server refuses in new values
/// since Kubernetes 1.33 (strict IP/CIDR validation) but keeps in objects stored before:
/// bits set beyond the prefix length, an IPv4-mapped IPv6 address, or a prefix length
/// with a leading 0. `None` for a CIDR in a form the API server accepts today.
pub fn legacy_cidr_form(s: &str) -> Option<&'static str> {
    let (addr, len) = s.split_once('/')?;
    if len.len() > 1 && len.starts_with('0') {
        return Some("a prefix length with a leading 0");
    }
    let ip: std::net::IpAddr = addr.parse().ok()?;
    if let std::net::IpAddr::V6(v6) = ip
        && v6.to_ipv4_mapped().is_some()
    {
        return Some("an IPv4-mapped IPv6 address");
    }
    let net = parse_cidr(s).ok()?;
    (net.addr() != ip).then_some("bits set beyond the prefix length")
}

/// The IP written before the `/` of a CIDR (what Go's `ParseCIDR` returns as the IP).
pub(crate) fn cidr_ip(s: &str) -> Option<std::net::IpAddr> {
    s.split_once('/')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid 71-character subdomain with one 71-character part.
    const LONG_PART: &str =
        "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde";
    /// 254 characters.
    const TOO_LONG_SUBDOMAIN: &str = concat!(
        "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde.",
        "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde.",
        "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcde.",
        "abcdefghij-abcdefghij-abcdefghij-abcdef"
    );

    #[test]
    fn names_and_labels() {
        type Check = fn(&str) -> Option<String>;
        let cases: &[(&str, Check, bool)] = &[
            ("x", dns_label, true),
            ("X", dns_label, false),
            ("-x", dns_label, false),
            ("a.b-c", dns_subdomain, true),
            ("a..b", dns_subdomain, false),
            // Regression: no 63-character limit per part of a subdomain.
            (LONG_PART, dns_subdomain, true),
            (TOO_LONG_SUBDOMAIN, dns_subdomain, false),
            (LONG_PART, dns_label, false),
            ("a.-b", dns_subdomain, false),
            ("app", qualified_name, true),
            ("kubernetes.io/metadata.name", qualified_name, true),
            ("/x", qualified_name, false),
            ("a/b/c", qualified_name, false),
            ("-app", qualified_name, false),
            ("", label_value, true),
            ("v1.2_3", label_value, true),
            ("bad value", label_value, false),
            ("serve-80-tcp", port_name, true),
            ("http", port_name, true),
            ("80", port_name, false),
            ("a--b", port_name, false),
            ("sixteen-chars-xx", port_name, false),
            ("HTTP", port_name, false),
        ];
        for (s, f, ok) in cases {
            assert_eq!(f(s).is_none(), *ok, "{s:?}: {:?}", f(s));
        }
    }

    #[test]
    fn cidrs() {
        assert_eq!(parse_cidr("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert!(parse_cidr("10.0.0.0").is_err());
        assert!(parse_cidr("10.0.0.0/33").is_err());
        assert!(parse_cidr("010.0.0.0/8").is_err());
        assert_eq!(
            parse_cidr("2001:db8::1/64").unwrap().to_string(),
            "2001:db8::/64"
        );
    }
}
