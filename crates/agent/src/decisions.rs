//! What the kernel's logged rules stand for: Prometheus labels for a logged decision, and
//! the per-decision packet counts read from the kernel's rule counters.

use std::collections::HashMap;
use std::process::Command;

use palisade_engine::Decision;
use palisade_nft::{LoggedDecision, Ruleset, TABLE};
use serde_json::Value;

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

/// Packets per log prefix from `nft -j list table` (rules with a counter and a log).
pub fn kernel_counts(netns: Option<&str>) -> std::io::Result<HashMap<String, u64>> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "nft"]);
            c
        }
        None => Command::new("nft"),
    };
    let (family, name) = TABLE.split_once(' ').unwrap_or(("inet", TABLE));
    let out = cmd.args(["-j", "list", "table", family, name]).output()?;
    if !out.status.success() {
        return Ok(HashMap::new());
    }
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    Ok(counts_in(&json))
}

fn counts_in(json: &Value) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let items = json.get("nftables").and_then(Value::as_array);
    for rule in items.into_iter().flatten().filter_map(|i| i.get("rule")) {
        let exprs = rule.get("expr").and_then(Value::as_array);
        let mut packets = None;
        let mut prefix = None;
        for e in exprs.into_iter().flatten() {
            if let Some(n) = e.pointer("/counter/packets").and_then(Value::as_u64) {
                packets = Some(n);
            }
            if let Some(p) = e.pointer("/log/prefix").and_then(Value::as_str) {
                prefix = Some(p.trim().to_string());
            }
        }
        if let (Some(n), Some(p)) = (packets, prefix) {
            *out.entry(p).or_default() += n;
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_summed_per_prefix() {
        let json: Value = serde_json::from_str(
            r#"{"nftables":[{"metainfo":{}},
            {"rule":{"expr":[{"counter":{"packets":3,"bytes":180}},{"log":{"prefix":"pal-1 ","group":100}},{"drop":null}]}},
            {"rule":{"expr":[{"counter":{"packets":2,"bytes":120}},{"log":{"prefix":"pal-1 ","group":100}},{"drop":null}]}},
            {"rule":{"expr":[{"counter":{"packets":9,"bytes":1}},{"accept":null}]}}]}"#,
        )
        .unwrap_or(Value::Null);
        let c = counts_in(&json);
        assert_eq!(c.get("pal-1"), Some(&5));
        assert_eq!(c.len(), 1);
    }
}
