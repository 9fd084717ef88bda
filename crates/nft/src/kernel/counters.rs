//! The kernel's packet counts per log prefix, read with `nft -j list table`.

use std::collections::HashMap;

use serde_json::Value;

use crate::kernel::apply::command;
use crate::render::TABLE;

/// Packets each log prefix's rules have counted since their chain was loaded, from
/// `nft -j list table` (rules with a counter and a log); empty when there is no table.
pub fn logged_packets(netns: Option<&str>) -> std::io::Result<HashMap<String, u64>> {
    let mut cmd = command(netns, "nft");
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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
