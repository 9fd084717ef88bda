//! The decision log: one JSON line per packet the kernel logged (drops and admin
//! decisions), naming the endpoints, the tier, the policy and the rule; and, when staged
//! policies would decide the connection differently, what they would do.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use palisade_engine::{Decision, Endpoint, EndpointKind, Engine, Flow};
use palisade_model::Action;
use palisade_nft::{LoggedDecision, Packet};
use serde_json::{Value, json};

use crate::metrics::Metrics;
use crate::nflog::LoggedPacket;
use crate::snapshot::{Snapshot, Snapshots};

/// Which logged decisions are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Denials only (and decisions that staged policies would change).
    #[default]
    Deny,
    /// Every decision the kernel logs: denials, and admin-tier allows and passes.
    All,
}

impl std::str::FromStr for Level {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "deny" => Ok(Level::Deny),
            "all" => Ok(Level::All),
            _ => Err(format!("{s:?}: expected deny or all")),
        }
    }
}

/// How much the decision log writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Which decisions.
    pub level: Level,
    /// The most lines per second written for one source address (a burst of twice as
    /// many is let through); further lines are dropped and counted.
    pub per_source_per_second: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            level: Level::Deny,
            per_source_per_second: 10.0,
        }
    }
}

impl Settings {
    /// Whether a line is of the level to write.
    fn wants(&self, line: &Value) -> bool {
        self.level == Level::All || line["verdict"] == "deny" || line.get("staged").is_some()
    }
}

/// A token bucket per source address.
#[derive(Debug)]
pub struct RateLimit {
    per_second: f64,
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl RateLimit {
    /// At most `per_second` lines per second per source, in bursts of up to twice that.
    pub fn new(per_second: f64) -> Self {
        RateLimit {
            per_second: per_second.max(0.0),
            buckets: HashMap::new(),
        }
    }

    /// Whether a line for `src` may be written at `now`.
    pub fn allow(&mut self, src: IpAddr, now: Instant) -> bool {
        let burst = (self.per_second * 2.0).max(1.0);
        if self.buckets.len() > 65_536 {
            // Sources that have been quiet long enough are full again: forget them.
            let per_second = self.per_second;
            self.buckets.retain(|_, (tokens, at)| {
                *tokens + now.duration_since(*at).as_secs_f64() * per_second < burst
            });
        }
        let (tokens, at) = self.buckets.entry(src).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * self.per_second).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The JSON line for a logged packet, or `None` when its prefix is not one of the ruleset
/// in force (a packet logged just before an update).
pub fn line(state: &Snapshot, packet: &LoggedPacket, time: SystemTime) -> Option<Value> {
    line_naming(state, packet, time, None)
}

/// [`line`], naming with `names` (the names the agent learned from DNS replies) the domain
/// through which a `domainNames` rule decided the packet: `"domain": {"pattern", "name",
/// "address"}`.
pub fn line_naming(
    state: &Snapshot,
    packet: &LoggedPacket,
    time: SystemTime,
    names: Option<&palisade_model::DnsMap>,
) -> Option<Value> {
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
        if let Some(hit) = names.and_then(|n| engine.domain_hit_in(n, m, packet.dst))
            && let Ok(hit) = serde_json::to_value(hit)
        {
            line["domain"] = hit;
        }
    }
    line["decision"] = serde_json::to_value(&decision.decision).unwrap_or(Value::Null);
    if let Some((ip, port)) = packet.original_dst
        && let Some(svc) = service_addressed(engine, ip, port, packet.protocol)
    {
        line["service"] = json!(svc.key());
        line["serviceAddress"] = json!(match port {
            Some(port) => std::net::SocketAddr::new(ip, port).to_string(),
            None => ip.to_string(),
        });
    }
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

/// The Service a connection addressed to `ip`:`port` was sent to: one whose cluster IP or
/// external address `ip` is, else, when `ip` is a node's, one with that `nodePort`.
fn service_addressed(
    engine: &Engine,
    ip: IpAddr,
    port: Option<u16>,
    protocol: Option<palisade_model::Protocol>,
) -> Option<&palisade_model::Service> {
    if let Some(svc) = engine.service_at(ip) {
        return Some(svc);
    }
    let (port, protocol) = (port?, protocol?);
    if !matches!(engine.endpoint_for_ip(ip).kind, EndpointKind::Host(_)) {
        return None;
    }
    engine.cluster().services.iter().find(|s| {
        s.ports
            .iter()
            .any(|p| p.protocol == protocol && p.node_port.is_some_and(|n| n.get() == port))
    })
}

/// The line for a new connection that the enforced policies let through and the staged
/// policies would deny (`"verdict":"allow"`, `"staged":{"allowed":false,...}`); `None`
/// for any other connection, or without staged policies.
pub fn staged_denial(state: &Snapshot, packet: &Packet, time: SystemTime) -> Option<Value> {
    let (engine, staged) = (state.engine.as_ref()?, state.staged.as_ref()?);
    let flow = |e: &Engine| Flow {
        src: e.endpoint_for_ip(packet.src),
        dst: e.endpoint_for_ip(packet.dst),
        protocol: packet.protocol,
        port: packet.dport,
    };
    let enforced = engine.evaluate(&flow(engine));
    let would = staged.evaluate(&flow(staged));
    if !enforced.allowed || would.allowed {
        return None;
    }
    Some(json!({
        "time": rfc3339(time),
        "src": name(engine, packet.src),
        "dst": name(engine, packet.dst),
        "srcIP": packet.src.to_string(),
        "dstIP": packet.dst.to_string(),
        "protocol": packet.protocol.as_str(),
        "port": packet.dport,
        "verdict": "allow",
        "decision": serde_json::to_value(&enforced).unwrap_or(Value::Null),
        "staged": {
            "allowed": false,
            "verdict": serde_json::to_value(&would).unwrap_or(Value::Null),
        },
    }))
}

/// Reads the kernel's new-connection events on a thread of its own and hands each
/// datagram's connections over, until the receiver is gone or the subscription fails.
fn follow_new_connections(
    tx: tokio::sync::mpsc::UnboundedSender<Vec<Packet>>,
) -> Result<(), palisade_nft::NftError> {
    let mut events = palisade_nft::new_connections(None, std::time::Duration::from_millis(500))?;
    std::thread::Builder::new()
        .name("new-connections".into())
        .spawn(move || {
            while !tx.is_closed() {
                match events.recv() {
                    Ok(packets) if packets.is_empty() => {}
                    Ok(packets) => {
                        if tx.send(packets).is_err() {
                            return;
                        }
                    }
                    // ENOBUFS: the reader fell behind and events were lost; go on.
                    Err(e) if e.raw_os_error() == Some(105) => {
                        tracing::warn!("new-connection events dropped by the kernel (the reader fell behind)");
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "new-connection events stopped; staged denials are no longer logged");
                        return;
                    }
                }
            }
        })
        .map_err(|e| palisade_nft::KernelError::io("the new-connection reader", e))?;
    Ok(())
}

/// The next batch of the dial log, or never when there is none.
async fn recv_dials(
    dials: &mut Option<crate::nflog::NflogStream>,
) -> Option<Result<Vec<LoggedPacket>, crate::nflog::NflogError>> {
    match dials {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// Reads the kernel's log group in this network namespace and writes one JSON line per
/// logged packet to `out`, until the reader fails or `out` cannot be written.
pub async fn run(
    snapshots: Snapshots,
    mut out: Box<dyn std::io::Write + Send>,
    settings: Settings,
    metrics: Arc<Metrics>,
    names: Option<crate::learner::LearnedNames>,
) -> Result<(), crate::nflog::NflogError> {
    let mut stream = crate::nflog::Nflog::bind(palisade_nft::LOG_GROUP)?.spawn()?;
    // Where connections were dialed to, before DNAT: names the Service of a denial on
    // every kernel (nflog's own conntrack attribute needs CONFIG_NETFILTER_NETLINK_GLUE_CT).
    let mut dials = match palisade_nft::install_dial_log(None)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            crate::nflog::Nflog::bind(palisade_nft::DIAL_GROUP)
                .and_then(crate::nflog::Nflog::spawn)
                .map_err(|e| e.to_string())
        }) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot log dialed addresses; denials are not paired with the Service they were sent to");
            None
        }
    };
    let mut dialed = crate::dialed::Dialed::default();
    let (new_tx, mut new_rx) = tokio::sync::mpsc::unbounded_channel();
    if let Err(e) = follow_new_connections(new_tx) {
        tracing::error!(error = %e, "cannot follow new connections; staged denials are not logged");
    }
    let mut lost = 0;
    let mut limit = RateLimit::new(settings.per_source_per_second);
    loop {
        let time = SystemTime::now();
        let now = Instant::now();
        // Within the source's rate, or dropped and counted.
        let mut admit = |src: IpAddr| {
            let admitted = limit.allow(src, now);
            if !admitted {
                metrics.decision_log_dropped();
            }
            admitted
        };
        let lines: Vec<Value> = tokio::select! {
            // Dials first: a denied packet was dialed (logged before DNAT) just before.
            biased;
            Some(packets) = recv_dials(&mut dials) => {
                if let Ok(packets) = packets {
                    for p in &packets {
                        dialed.record(p, now);
                    }
                }
                continue;
            }
            packets = stream.recv() => {
                let Some(packets) = packets else { return Ok(()) };
                let state = snapshots.borrow().clone();
                let mut packets = packets?;
                for p in &mut packets {
                    p.original_dst = p.original_dst.or_else(|| dialed.original(p));
                }
                let names = names.as_ref().map(|n| n.borrow().clone());
                packets
                    .iter()
                    .filter_map(|p| Some((p.src, line_naming(&state, p, time, names.as_deref())?)))
                    .filter(|(_, l)| settings.wants(l))
                    .filter_map(|(src, l)| admit(src).then_some(l))
                    .collect()
            }
            Some(packets) = new_rx.recv() => {
                let state = snapshots.borrow().clone();
                if state.staged.is_none() {
                    continue;
                }
                packets
                    .iter()
                    .filter_map(|p| Some((p.src, staged_denial(&state, p, time)?)))
                    .filter_map(|(src, l)| admit(src).then_some(l))
                    .collect()
            }
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
    fn the_level_picks_denials_or_every_decision() {
        let deny = json!({"verdict": "deny"});
        let allow = json!({"verdict": "allow"});
        let staged = json!({"verdict": "allow", "staged": {"allowed": false}});
        let at = |level| Settings {
            level,
            ..Settings::default()
        };
        assert!(at(Level::Deny).wants(&deny));
        assert!(!at(Level::Deny).wants(&allow));
        assert!(at(Level::Deny).wants(&staged));
        assert!(at(Level::All).wants(&allow));
        assert_eq!("all".parse::<Level>(), Ok(Level::All));
        assert!("everything".parse::<Level>().is_err());
    }

    #[test]
    fn the_rate_limit_is_per_source_and_refills() {
        let mut limit = RateLimit::new(2.0);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t = Instant::now();
        let written = (0..10).filter(|_| limit.allow(a, t)).count();
        assert_eq!(written, 4, "a burst of twice the rate");
        assert!(limit.allow(b, t), "another source has its own bucket");
        assert!(!limit.allow(a, t));
        assert!(limit.allow(a, t + std::time::Duration::from_millis(600)));
    }

    #[test]
    fn timestamps() {
        let t = |s| SystemTime::UNIX_EPOCH + Duration::from_millis(s);
        assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(t(951_782_400_123)), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(t(1_795_476_031_002)), "2026-11-23T23:20:31.002Z");
    }
}
