//! ClusterNetworkPolicy `domainNames`: patterns the CRD admits only by accident, names the
//! DNS map (`--dns`) cannot resolve, and domain rules whose addresses a `networks` rule of
//! the same policy also decides.

use palisade_engine::PolicyInfo;
use palisade_model::{AdminPeer, AdminPolicy, DomainPattern};

use super::{Code, Finding};
use crate::Analysis;

/// The characters the CRD's first-character class `[a-zA-z0-9]` admits only because it
/// spans `A` to `z`.
const ACCIDENTAL: &[char] = &['[', '\\', ']', '^', '_', '`'];

impl Analysis<'_> {
    pub(crate) fn lint_domains(&self, out: &mut Vec<Finding>) {
        for policy in &self.engine.cluster().admin_policies {
            for (r, rule) in policy.egress.iter().enumerate() {
                for (k, peer) in rule.peers.iter().enumerate() {
                    let AdminPeer::DomainNames(patterns) = peer else {
                        continue;
                    };
                    for (d, pattern) in patterns.iter().enumerate() {
                        let field = format!("spec.egress[{r}].to[{k}].domainNames[{d}]");
                        self.lint_pattern(policy, pattern, &field, out);
                        self.lint_overlap(policy, r, pattern, &field, out);
                    }
                }
            }
        }
    }

    /// A pattern with an accidental character, and one no name of the DNS map matches.
    fn lint_pattern(
        &self,
        policy: &AdminPolicy,
        pattern: &DomainPattern,
        field: &str,
        out: &mut Vec<Finding>,
    ) {
        let starts_oddly = pattern
            .text
            .trim_start_matches("*.")
            .split('.')
            .filter_map(|label| label.chars().next())
            .find(|c| ACCIDENTAL.contains(c));
        if let Some(c) = starts_oddly {
            out.push(Finding::admin(Code::DomainPatternAccident, policy, field.to_string()).says(
                format!(
                    "domain name {:?} has a label starting with {c:?}: the CRD's pattern admits it only because its class [a-zA-z0-9] spans A to z; no host name starts with it, so this entry likely matches nothing",
                    pattern.text
                ),
                "write the host name as it is resolved (letters, digits and '-', a label starting with a letter or digit)",
            ));
        }
        if let Some(dns) = &self.engine.cluster().dns
            && dns.resolve(pattern).next().is_none()
        {
            out.push(Finding::admin(Code::UnresolvedDomain, policy, field.to_string()).says(
                format!(
                    "no name of the DNS map matches {:?}: offline, this entry allows no address",
                    pattern.text
                ),
                "add the name's answers to the --dns map, or correct the pattern",
            ));
        }
    }

    /// Addresses of a domain rule that a `networks` rule of the same policy also holds:
    /// an earlier one decides them first (the domain rule never does for them).
    fn lint_overlap(
        &self,
        policy: &AdminPolicy,
        rule_index: usize,
        pattern: &DomainPattern,
        field: &str,
        out: &mut Vec<Finding>,
    ) {
        let Some(dns) = &self.engine.cluster().dns else {
            return;
        };
        for (other, rule) in policy.egress.iter().enumerate() {
            let nets = rule.peers.iter().flat_map(|p| match p {
                AdminPeer::Networks(nets) => nets.as_slice(),
                _ => &[],
            });
            let nets: Vec<_> = nets.collect();
            let Some((name, ip, net)) = dns.resolve(pattern).find_map(|(name, ip)| {
                nets.iter()
                    .find(|n| n.contains(&ip))
                    .map(|n| (name, ip, *n))
            }) else {
                continue;
            };
            let order = if other < rule_index {
                format!(
                    "egress rule {other} ({}) comes first and decides it, so this rule never does",
                    action(policy, rule.action)
                )
            } else {
                format!(
                    "egress rule {other} ({}) would decide it if this rule did not",
                    action(policy, rule.action)
                )
            };
            out.push(Finding::admin(Code::DomainNetworkOverlap, policy, field.to_string()).says(
                format!(
                    "{:?} matches {name} \u{2192} {ip}, which networks {net} of the same policy also holds: {order}",
                    pattern.text
                ),
                "keep one rule per destination: narrow the networks CIDR, or order the rules so the intended one comes first",
            ));
        }
    }
}

/// The action as the policy's kind spells it.
fn action(policy: &AdminPolicy, action: palisade_model::Action) -> &'static str {
    PolicyInfo::admin(policy).action_name(action)
}
