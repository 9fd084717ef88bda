//! How big a ruleset is: what `palisade compile --target nftables --stats` prints.

use crate::ir::{NamedSet, Ruleset};

/// Counts of a ruleset's parts, and the size of its `nft -f` script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Stats {
    /// Pod addresses in the dispatch maps (egress and ingress).
    pub map_elements: usize,
    /// (pod address, peer) pairs in the exemption sets (egress and ingress).
    pub exempt_elements: usize,
    /// Chains (not counting the two base chains).
    pub chains: usize,
    /// Rules in those chains.
    pub rules: usize,
    /// Named address sets.
    pub sets: usize,
    /// Elements (addresses or prefixes) in the named sets.
    pub set_elements: usize,
    /// Log ids (distinct logged decisions).
    pub log_ids: usize,
    /// Bytes of the `nft -f` script ([`Ruleset::render`]); `None` from
    /// [`Ruleset::counts`], which does not render.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script_bytes: Option<usize>,
}

impl Ruleset {
    /// Counts the ruleset's parts and renders it once to measure the script.
    pub fn stats(&self) -> Stats {
        Stats {
            script_bytes: Some(self.render().len()),
            ..self.counts()
        }
    }

    /// Counts the ruleset's parts without rendering it (cheap enough for every update).
    pub fn counts(&self) -> Stats {
        Stats {
            map_elements: self.egress.len() + self.ingress.len(),
            exempt_elements: self.egress_exempt.len() + self.ingress_exempt.len(),
            chains: self.chains.len(),
            rules: self.chains.iter().map(|c| c.rules.len()).sum(),
            sets: self.sets.len(),
            set_elements: self.sets.iter().map(NamedSet::range_count).sum(),
            log_ids: self.logs.len(),
            script_bytes: None,
        }
    }
}

/// One `name: value` line per count.
impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "map elements:    {}", self.map_elements)?;
        writeln!(f, "exempt elements: {}", self.exempt_elements)?;
        writeln!(f, "chains:          {}", self.chains)?;
        writeln!(f, "rules:           {}", self.rules)?;
        writeln!(f, "sets:            {}", self.sets)?;
        writeln!(f, "set elements:    {}", self.set_elements)?;
        writeln!(f, "log ids:         {}", self.log_ids)?;
        match self.script_bytes {
            Some(n) => writeln!(f, "script bytes:    {n}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Stats;
    use crate::ir::{Chain, NamedSet, Rule, Ruleset, Verdict};

    #[test]
    fn counts_what_the_ruleset_holds() {
        let ip = |s: &str| s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        let rs = Ruleset {
            chains: vec![Chain {
                name: "a1".into(),
                rules: vec![
                    Rule {
                        matches: vec![],
                        verdict: Verdict::Drop,
                        log: None,
                    };
                    3
                ]
                .into(),
            }],
            sets: vec![NamedSet {
                name: "s4".into(),
                v6: false,
                interval: true,
                // Two ranges: the first two prefixes adjoin.
                elements: ["10.0.0.0/24", "10.0.1.0/24", "10.0.3.0/24"]
                    .iter()
                    .map(|n| n.parse().unwrap_or_else(|e| panic!("{e}")))
                    .collect::<Vec<_>>()
                    .into(),
                learned: None,
            }],
            egress: vec![(ip("10.0.0.1"), "a1".into())],
            ingress: vec![(ip("10.0.0.1"), "a1".into())],
            egress_exempt: vec![(ip("10.0.0.1"), ip("10.0.0.1"))],
            ..Ruleset::default()
        };
        let s = rs.stats();
        assert_eq!(
            (
                s.map_elements,
                s.exempt_elements,
                s.chains,
                s.rules,
                s.sets,
                s.set_elements
            ),
            (2, 1, 1, 3, 1, 2)
        );
        assert_eq!(s.script_bytes, Some(rs.render().len()));
        assert!(s.to_string().contains("rules:           3\n"), "{s}");
        assert_eq!(
            rs.counts(),
            Stats {
                script_bytes: None,
                ..s
            }
        );
        assert!(!rs.counts().to_string().contains("script bytes"));
    }
}
