//! What the kernel's logged rules stand for: Prometheus labels for a logged decision, and
//! the kernel's per-prefix packet counts ([`palisade_nft::logged_packets`]) by decision.

use std::collections::HashMap;

use palisade_engine::Decision;
use palisade_nft::{LoggedDecision, Ruleset};

/// Metric labels naming a decision: direction, tier, action, and the policy and rule.
pub fn labels(d: &LoggedDecision) -> Vec<(String, String)> {
    let mut l = vec![
        ("direction".to_string(), d.direction.as_str().to_string()),
        ("tier".to_string(), d.tier.as_str().to_string()),
    ];
    let mut push = |k: &str, v: String| l.push((k.to_string(), v));
    match &d.decision {
        Decision::Rule(m) => {
            push("action", m.action_name().to_string());
            push("kind", m.policy.reference.kind.as_str().to_string());
            push(
                "namespace",
                m.policy.reference.namespace.clone().unwrap_or_default(),
            );
            push("policy", m.policy.reference.name.clone());
            push("rule", m.index.to_string());
            push("rule_name", m.rule_name().unwrap_or_default().to_string());
        }
        Decision::Isolated(policies) => {
            push("action", "Deny".into());
            push("kind", "NetworkPolicy".into());
            let first = policies.first();
            push(
                "namespace",
                first
                    .and_then(|p| p.reference.namespace.clone())
                    .unwrap_or_default(),
            );
            let names: Vec<&str> = policies.iter().map(|p| p.reference.name.as_str()).collect();
            push("policy", names.join(","));
            push("rule", "isolation".into());
            push("rule_name", String::new());
        }
        other => {
            push("action", "Deny".into());
            push("reason", other.to_string());
        }
    }
    l
}

/// Packets per decision (as metric labels) for the ruleset in the kernel.
pub fn by_decision(
    ruleset: &Ruleset,
    counts: &HashMap<String, u64>,
) -> HashMap<Vec<(String, String)>, u64> {
    let mut out = HashMap::new();
    for (prefix, decision) in ruleset.log_prefixes() {
        if let Some(n) = counts.get(&prefix) {
            *out.entry(labels(decision)).or_default() += n;
        }
    }
    out
}
