//! Domain names: ClusterNetworkPolicy `domainNames` patterns, and the DNS map (`--dns`) that
//! says which addresses a name resolves to when analysing offline.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use serde_json::Value;

use crate::diag::{Diagnostic, Severity};

/// One `domainNames` entry: an exact name, or `*.` and a base name matching one or more
/// labels in front of it (not the base name itself). Matching ignores case and a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DomainPattern {
    /// As written in the policy.
    pub text: String,
    /// Whether it starts with `*.`.
    pub wildcard: bool,
    /// The name after `*.` (or the whole name), lower case, without a trailing dot.
    pub base: String,
}

impl DomainPattern {
    /// Reads a pattern as written (validated elsewhere).
    pub fn parse(text: &str) -> DomainPattern {
        let (wildcard, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        DomainPattern {
            text: text.to_string(),
            wildcard,
            base: normalize(rest),
        }
    }

    /// Whether `name` (any case, with or without a trailing dot) matches.
    pub fn matches(&self, name: &str) -> bool {
        let name = normalize(name);
        match self.wildcard {
            false => name == self.base,
            true => name
                .strip_suffix(&self.base)
                .and_then(|front| front.strip_suffix('.'))
                .is_some_and(|front| !front.is_empty()),
        }
    }
}

impl std::fmt::Display for DomainPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A name as DNS compares it: lower case, no trailing dot.
pub fn normalize(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// What a name resolves to in a DNS map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsEntry {
    /// Its A and AAAA addresses.
    pub addresses: Vec<IpAddr>,
    /// The TTL in seconds, when given.
    pub ttl: Option<u32>,
    /// `file:line` where it is written.
    pub at: String,
}

/// The answers of a DNS map: name (normalized) → addresses. Offline, a `domainNames` peer
/// matches the addresses the map gives for the names its patterns match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsMap {
    /// The entries, by normalized name.
    pub names: BTreeMap<String, DnsEntry>,
}

impl DnsMap {
    /// The entry of `name`.
    pub fn get(&self, name: &str) -> Option<&DnsEntry> {
        self.names.get(&normalize(name))
    }

    /// Every `(name, address)` whose name `pattern` matches, in name order.
    pub fn resolve<'a>(
        &'a self,
        pattern: &'a DomainPattern,
    ) -> impl Iterator<Item = (&'a str, IpAddr)> + 'a {
        self.names
            .iter()
            .filter(|(name, _)| pattern.matches(name))
            .flat_map(|(name, e)| e.addresses.iter().map(move |ip| (name.as_str(), *ip)))
    }

    /// Reads a DNS map: a hosts-style file (`ADDRESS NAME [NAME…]` per line, `#` comments)
    /// or YAML (`NAME: [ADDRESS, …]` or `NAME: {addresses: [...], ttl: SECONDS}`). Every
    /// error is listed with its line.
    pub fn parse(file: &str, text: &str) -> Result<DnsMap, Vec<Diagnostic>> {
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        let hosts = first.is_some_and(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<IpAddr>().is_ok())
        });
        let mut errors = Vec::new();
        let mut map = DnsMap::default();
        let mut error = |line: usize, field: &str, message: String| {
            errors.push(Diagnostic {
                severity: Severity::Error,
                file: Arc::from(file),
                line,
                object: String::new(),
                field: field.to_string(),
                message,
            });
        };
        if hosts {
            for (i, line) in text.lines().enumerate() {
                let line_no = i + 1;
                let content = line.split('#').next().unwrap_or("").trim();
                let mut words = content.split_whitespace();
                let Some(address) = words.next() else {
                    continue;
                };
                let Ok(ip) = address.parse::<IpAddr>() else {
                    error(line_no, "", format!("{address:?} is not an IP address"));
                    continue;
                };
                let names: Vec<&str> = words.collect();
                if names.is_empty() {
                    error(line_no, "", format!("{address} has no name after it"));
                }
                for name in names {
                    map.add(name, ip, None, format!("{file}:{line_no}"), &mut |m| {
                        error(line_no, name, m)
                    });
                }
            }
        } else {
            map.parse_yaml(file, text, &mut error);
        }
        match errors.is_empty() {
            true => Ok(map),
            false => Err(errors),
        }
    }

    fn parse_yaml(&mut self, file: &str, text: &str, error: &mut impl FnMut(usize, &str, String)) {
        let documents = match crate::yaml::parse_documents(text) {
            Ok(d) => d,
            Err(e) => {
                error(e.line, "", format!("YAML syntax error: {}", e.message));
                return;
            }
        };
        for doc in documents {
            let Value::Object(entries) = &doc.value else {
                if !doc.value.is_null() {
                    error(
                        doc.line,
                        "",
                        "a DNS map is a mapping of names to addresses".into(),
                    );
                }
                continue;
            };
            for (name, value) in entries {
                let line = doc.lines.line_of(name).unwrap_or(doc.line);
                let (list, ttl) = match value {
                    Value::Array(list) => (list.clone(), None),
                    Value::Object(m) => {
                        let ttl = match m.get("ttl") {
                            None => None,
                            Some(t) => match t.as_u64().and_then(|t| u32::try_from(t).ok()) {
                                Some(t) => Some(t),
                                None => {
                                    error(
                                        line,
                                        &format!("{name}.ttl"),
                                        format!("{t} is not a number of seconds"),
                                    );
                                    None
                                }
                            },
                        };
                        if let Some(k) = m.keys().find(|k| *k != "ttl" && *k != "addresses") {
                            error(
                                line,
                                &format!("{name}.{k}"),
                                format!("unknown field {k:?} (a name has addresses and ttl)"),
                            );
                        }
                        let list = m.get("addresses").and_then(Value::as_array).cloned();
                        if list.is_none() {
                            error(
                                line,
                                name,
                                "addresses: Required value (a list of addresses)".into(),
                            );
                        }
                        (list.unwrap_or_default(), ttl)
                    }
                    Value::String(s) => (vec![Value::String(s.clone())], None),
                    _ => {
                        error(line, name, "a name maps to a list of addresses".into());
                        continue;
                    }
                };
                for (i, a) in list.iter().enumerate() {
                    let at = format!("{name}[{i}]");
                    let line = doc.lines.line_of(&at).unwrap_or(line);
                    match a.as_str().and_then(|s| s.parse::<IpAddr>().ok()) {
                        Some(ip) => self.add(name, ip, ttl, format!("{file}:{line}"), &mut |m| {
                            error(line, name, m)
                        }),
                        None => error(line, &at, format!("{a} is not an IP address")),
                    }
                }
            }
        }
    }

    fn add(
        &mut self,
        name: &str,
        ip: IpAddr,
        ttl: Option<u32>,
        at: String,
        error: &mut impl FnMut(String),
    ) {
        let key = normalize(name);
        if let Some(e) = crate::validate::dns_subdomain(&key) {
            error(e);
            return;
        }
        let entry = self.names.entry(key).or_insert_with(|| DnsEntry {
            addresses: Vec::new(),
            ttl,
            at,
        });
        if !entry.addresses.contains(&ip) {
            entry.addresses.push(ip);
        }
        entry.ttl = match (entry.ttl, ttl) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_upstream_documents() {
        let cases = [
            ("kubernetes.io", "kubernetes.io", true),
            ("kubernetes.io", "www.kubernetes.io", false),
            ("kubernetes.io", "my-kubernetes.io", false),
            ("blog.kubernetes.io", "kubernetes.io", false),
            ("*.kubernetes.io", "www.kubernetes.io", true),
            ("*.kubernetes.io", "latest.blog.kubernetes.io", true),
            ("*.kubernetes.io", "kubernetes.io", false),
            ("*.kubernetes.io", "my-kubernetes.io", false),
            ("*.kubernetes.io", "wikipedia.org", false),
            ("Kubernetes.IO.", "kubernetes.io", true),
            ("kubernetes.io", "KUBERNETES.io.", true),
            ("*.kubernetes.io.", "a.kubernetes.io", true),
            ("*.kubernetes.io", ".kubernetes.io", false),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(
                DomainPattern::parse(pattern).matches(name),
                want,
                "{pattern} ~ {name}"
            );
        }
    }

    #[test]
    fn domain_names_follow_the_crd_pattern_as_written() {
        let cases = [
            ("example.com", true),
            ("*.example.com", true),
            ("example.com.", true),
            ("EXAMPLE.com", true),
            ("a_b.example.com", true),
            ("^a.example.com", true),
            ("`x.example.com", true),
            ("[x.example.com", true),
            ("x-.example.com", false),
            ("localhost", false),
            ("*", false),
            ("*.com", false),
            ("a.*.com", false),
            ("", false),
            ("1.2.3.4", true),
        ];
        for (s, want) in cases {
            let valid = crate::convert::admin::domain_pattern_valid(s);
            assert_eq!(valid, want, "{s:?}");
        }
    }

    #[test]
    fn a_map_is_read_from_hosts_lines_or_yaml() {
        let hosts = "# answers\n54.187.174.169 api.stripe.com API.Stripe.com.\n2001:db8::1 v6.example.com  # comment\n\n54.187.216.72 api.stripe.com\n";
        let m = DnsMap::parse("dns.txt", hosts).unwrap();
        let e = m.get("api.stripe.com").unwrap();
        assert_eq!(e.addresses.len(), 2, "{e:?}");
        assert_eq!(e.at, "dns.txt:2");
        assert!(m.get("V6.example.com.").is_some());
        let yaml = "api.stripe.com: [54.187.174.169]\ndb.example.com:\n  addresses: [192.0.2.10, \"2001:db8::10\"]\n  ttl: 30\none.example.com: 192.0.2.1\n";
        let m = DnsMap::parse("dns.yaml", yaml).unwrap();
        assert_eq!(m.get("db.example.com").unwrap().ttl, Some(30));
        assert_eq!(m.get("db.example.com").unwrap().addresses.len(), 2);
        assert_eq!(m.get("one.example.com").unwrap().at, "dns.yaml:5");
        let p = DomainPattern::parse("*.example.com");
        let resolved: Vec<(&str, IpAddr)> = m.resolve(&p).collect();
        assert_eq!(resolved.len(), 3);
    }

    #[test]
    fn errors_name_their_line() {
        let bad = DnsMap::parse(
            "d",
            "10.0.0.1 ok.example.com\n10.0.0.300 x.example.com\n10.0.0.2\n10.0.0.3 bad_name\n",
        )
        .unwrap_err();
        let lines: Vec<(usize, &str)> = bad.iter().map(|d| (d.line, d.message.as_str())).collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(lines[0].0, 2);
        assert_eq!(lines[1], (3, "10.0.0.2 has no name after it"));
        assert_eq!(lines[2].0, 4);
        let bad = DnsMap::parse(
            "d",
            "a.example.com: [nope]\nb.example.com: {addresses: [10.0.0.1], ttl: -1}\n",
        )
        .unwrap_err();
        let lines: Vec<usize> = bad.iter().map(|d| d.line).collect();
        assert_eq!(lines, [1, 2]);
    }
}
