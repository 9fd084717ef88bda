//! Focusing a matrix: which pods are sources (rows) and destinations (columns).

use crate::error::CliError;

/// `--direction`: which side of the `--namespace` focus to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DirectionArg {
    /// Connections into the namespace(s), from every pod.
    Ingress,
    /// Connections out of the namespace(s), to every pod.
    Egress,
}

/// The focus flags of `matrix`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Focus {
    /// Sources only: `namespace/pod`, `namespace` (all its pods), `*` wildcards allowed
    /// (`web/frontend-*`); comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    pub from: Vec<String>,
    /// Destinations only, as for --from.
    #[arg(long, value_delimiter = ',')]
    pub to: Vec<String>,
    /// Only pods of these namespaces (comma-separated or repeated); with --direction, only
    /// as destinations (ingress) or as sources (egress).
    #[arg(long, value_delimiter = ',')]
    pub namespace: Vec<String>,
    /// With --namespace: show connections into it (`ingress`) or out of it (`egress`).
    #[arg(long, value_enum, requires = "namespace")]
    pub direction: Option<DirectionArg>,
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || !text[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Whether pod `ns/name` matches a `--from`/`--to` pattern.
fn matches(pattern: &str, ns: &str, name: &str) -> bool {
    match pattern.split_once('/') {
        Some((p_ns, p_name)) => glob(p_ns, ns) && glob(p_name, name),
        None => glob(pattern, ns),
    }
}

impl Focus {
    /// The rows and columns among `pods` (namespace, name), in their order. A pattern or
    /// namespace that selects no pod is a usage error, never an empty matrix.
    pub fn select(&self, pods: &[(&str, &str)]) -> Result<(Vec<usize>, Vec<usize>), CliError> {
        for ns in &self.namespace {
            if !pods.iter().any(|(n, _)| n == ns) {
                return Err(CliError::Usage(format!(
                    "--namespace {ns}: no pod with an address in that namespace"
                )));
            }
        }
        self.pick(pods, pods, &self.to, "pod with an address")
    }

    /// The rows among `pods` and the columns among `services` (namespace, name), in their
    /// order: `--to` names Services (`svc/NS/NAME`, `NS/NAME` or `NS`, `*` wildcards),
    /// `--namespace` picks the Services of the namespace as well as its pods.
    pub fn select_services(
        &self,
        pods: &[(&str, &str)],
        services: &[(&str, &str)],
    ) -> Result<(Vec<usize>, Vec<usize>), CliError> {
        for ns in &self.namespace {
            if !pods.iter().chain(services).any(|(n, _)| n == ns) {
                return Err(CliError::Usage(format!(
                    "--namespace {ns}: no pod with an address and no Service in that namespace"
                )));
            }
        }
        let to: Vec<String> = self
            .to
            .iter()
            .map(|p| p.strip_prefix("svc/").unwrap_or(p).to_string())
            .collect();
        self.pick(pods, services, &to, "Service")
    }

    /// Rows among `sources` by `--from`, columns among `dests` by `to` (a `dests_noun`), both
    /// by `--namespace` and `--direction`.
    fn pick(
        &self,
        sources: &[(&str, &str)],
        dests: &[(&str, &str)],
        to: &[String],
        dests_noun: &str,
    ) -> Result<(Vec<usize>, Vec<usize>), CliError> {
        for (flag, patterns, among, noun) in [
            ("--from", &self.from[..], sources, "pod with an address"),
            ("--to", to, dests, dests_noun),
        ] {
            for p in patterns {
                if !among.iter().any(|(ns, name)| matches(p, ns, name)) {
                    return Err(CliError::Usage(format!(
                        "{flag} {p}: matches no {noun} (use namespace/{}, a namespace, or * wildcards)",
                        if noun == "Service" { "name" } else { "pod" }
                    )));
                }
            }
        }
        let in_ns = |ns: &str| self.namespace.is_empty() || self.namespace.iter().any(|n| n == ns);
        let (ns_rows, ns_cols) = match self.direction {
            None => (true, true),
            Some(DirectionArg::Ingress) => (false, true),
            Some(DirectionArg::Egress) => (true, false),
        };
        let pick = |among: &[(&str, &str)], patterns: &[String], by_ns: bool| -> Vec<usize> {
            among
                .iter()
                .enumerate()
                .filter(|(_, (ns, name))| {
                    (!by_ns || in_ns(ns))
                        && (patterns.is_empty() || patterns.iter().any(|p| matches(p, ns, name)))
                })
                .map(|(i, _)| i)
                .collect()
        };
        let (rows, cols) = (pick(sources, &self.from, ns_rows), pick(dests, to, ns_cols));
        if rows.is_empty() || cols.is_empty() {
            return Err(CliError::Usage(
                "the focus flags together select no source or no destination".into(),
            ));
        }
        Ok((rows, cols))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (p, t, want) in [
            ("a", "a", true),
            ("a", "ab", false),
            ("a*", "ab", true),
            ("*b", "ab", true),
            ("a*c*e", "abcde", true),
            ("a*c*e", "abde", false),
            ("*", "", true),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(glob(p, t), want, "{p} ~ {t}");
        }
    }

    #[test]
    fn focus_picks_rows_and_columns() {
        let pods = [("x", "a"), ("x", "b"), ("y", "a"), ("z", "web-1")];
        let f = |from: &[&str], to: &[&str], ns: &[&str], dir| Focus {
            from: from.iter().map(|s| s.to_string()).collect(),
            to: to.iter().map(|s| s.to_string()).collect(),
            namespace: ns.iter().map(|s| s.to_string()).collect(),
            direction: dir,
        };
        let sel = |focus: Focus| focus.select(&pods).unwrap();
        assert_eq!(
            sel(f(&[], &[], &[], None)),
            (vec![0, 1, 2, 3], vec![0, 1, 2, 3]),
            "everything"
        );
        assert_eq!(
            sel(f(&["x"], &["z/web-*"], &[], None)),
            (vec![0, 1], vec![3]),
            "namespace and glob"
        );
        assert_eq!(
            sel(f(&[], &[], &["y"], None)),
            (vec![2], vec![2]),
            "namespace both ways"
        );
        assert_eq!(
            sel(f(&[], &[], &["y"], Some(DirectionArg::Ingress))),
            (vec![0, 1, 2, 3], vec![2]),
            "into y"
        );
        assert_eq!(
            sel(f(&[], &[], &["y"], Some(DirectionArg::Egress))),
            (vec![2], vec![0, 1, 2, 3]),
            "out of y"
        );
        assert!(
            f(&["q/*"], &[], &[], None).select(&pods).is_err(),
            "no match is an error"
        );
        assert!(
            f(&[], &[], &["q"], None).select(&pods).is_err(),
            "unknown namespace"
        );
    }
}
