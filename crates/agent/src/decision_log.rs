//! The decision log: one JSON line per packet the kernel logged (drops and admin
//! decisions), naming the endpoints, the tier, the policy and the rule; and, when staged
//! policies would decide the connection differently, what they would do.

use std::net::IpAddr;
use std::time::SystemTime;

use palisade_engine::{Decision, Endpoint, EndpointKind, Engine, Flow};
use palisade_model::Action;
use palisade_nft::LoggedDecision;
use serde_json::{Value, json};

use crate::nflog::LoggedPacket;
use crate::reconcile::{Shared, State};

/// The JSON line for a logged packet, or `None` when its prefix is not one of the ruleset
/// in force (a packet logged just before an update).
pub fn line(state: &State, packet: &LoggedPacket, time: SystemTime) -> Option<Value> {
    let ruleset = state.ruleset.as_ref()?;
    let engine = state.engine.as_ref()?;
    let decision = ruleset.logged_decision(&packet.prefix)?;
    let mut line = json!({
        "time": rfc3339(time),
        "src": name(engine, packet.src),
        "dst": name(engine, packet.dst),
        "srcIP": packet.src.to_string(),
        "dstIP": packet.dst.to_string(),
        "protocol": packet.protocol.map(|p| p.as_str()),
        "port": packet.dport,
        "verdict": verdict(decision),
        "direction": decision.direction.as_str(),
        "tier": decision.tier.as_str(),
    });
    if let Decision::Rule(m) = &decision.decision {
        line["policy"] = json!({
            "kind": m.policy.reference.kind.as_str(),
            "namespace": m.policy.reference.namespace,
            "name": m.policy.reference.name,
        });
        line["rule"] = json!({"index": m.index, "name": m.rule_name()});
    }
    line["decision"] = serde_json::to_value(&decision.decision).unwrap_or(Value::Null);
    if let (Some(staged), Some(protocol), Some(port)) =
        (state.staged.as_ref(), packet.protocol, packet.dport)
    {
        let flow = |e: &Engine| Flow {
            src: e.endpoint_for_ip(packet.src),
            dst: e.endpoint_for_ip(packet.dst),
            protocol,
            port,
        };
        let enforced = engine.evaluate(&flow(engine));
        let would = staged.evaluate(&flow(staged));
        if would.allowed != enforced.allowed {
            line["staged"] = json!({
                "allowed": would.allowed,
                "verdict": serde_json::to_value(&would).unwrap_or(Value::Null),
            });
        }
    }
    Some(line)
}

/// Reads the kernel's log group in this network namespace and writes one JSON line per
/// logged packet to `out`, until the reader fails or `out` cannot be written.
pub async fn run(
    state: Shared,
    mut out: Box<dyn std::io::Write + Send>,
) -> Result<(), crate::nflog::NflogError> {
    let mut stream = crate::nflog::Nflog::bind(palisade_nft::LOG_GROUP)?.spawn()?;
    let mut lost = 0;
    while let Some(packets) = stream.recv().await {
        let time = SystemTime::now();
        let lines: Vec<Value> = {
            let state = state.read().unwrap_or_else(|e| e.into_inner());
            packets?
                .iter()
                .filter_map(|p| line(&state, p, time))
                .collect()
        };
        for l in lines {
            if writeln!(out, "{l}").and_then(|()| out.flush()).is_err() {
                tracing::error!("the decision log cannot be written; it stops");
                return Ok(());
            }
        }
        if stream.lost() > lost {
            tracing::warn!(
                lost = stream.lost() - lost,
                "decision log messages dropped by the kernel (the reader fell behind)"
            );
            lost = stream.lost();
        }
    }
    Ok(())
}

/// `allow`, `deny` or `pass`: what the logged rule did to the packet.
fn verdict(d: &LoggedDecision) -> &'static str {
    match &d.decision {
        Decision::Rule(m) => match m.action {
            Action::Allow => "allow",
            Action::Deny => "deny",
            Action::Pass => "pass",
        },
        _ => "deny",
    }
}

/// `namespace/pod`, `node/<name>`, or the address itself.
fn name(engine: &Engine, ip: IpAddr) -> String {
    let Endpoint { kind, .. } = engine.endpoint_for_ip(ip);
    match kind {
        EndpointKind::Pod(id) => engine.cluster().pods[id].key(),
        EndpointKind::Host(Some(n)) => format!("node/{}", engine.cluster().nodes[n].name),
        EndpointKind::Host(None) | EndpointKind::External => ip.to_string(),
    }
}

/// `2026-11-23T23:40:31.002Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps() {
        let t = |s| SystemTime::UNIX_EPOCH + Duration::from_millis(s);
        assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(t(951_782_400_123)), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(t(1_795_476_031_002)), "2026-11-23T23:20:31.002Z");
    }
}
