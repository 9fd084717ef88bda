//! The agent's Prometheus metrics and readiness, in one place.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use palisade_nft::{NftError, Ruleset};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use palisade_follow::store::Store;

type Labels = Vec<(String, String)>;

/// The value locked, even if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A label value escaped as the Prometheus and OpenMetrics text formats require (`\\`,
/// `\"`, `\n`): the encoder writes values as they are, and a policy or rule name must not
/// end the value early and forge series.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Every metric the agent exports, and its readiness.
pub struct Metrics {
    registry: Registry,
    objects: Family<Labels, Gauge>,
    invalid_texts: Gauge,
    stand_ins: Gauge,
    ruleset: Family<Labels, Gauge>,
    reconcile_seconds: Histogram,
    time_to_apply_seconds: Histogram,
    reconcile_errors: Counter,
    connections_cut: Counter,
    decision_log_dropped: Counter,
    decisions: Family<Labels, Gauge>,
    source_unavailable: Family<Labels, Gauge>,
    dns_replies: Family<Labels, Counter>,
    dns_learned: Counter,
    dns_evicted: Counter,
    dns_addresses: Gauge,
    dns_hold_seconds: Histogram,
    /// Whether the first ruleset is in the kernel.
    loaded: AtomicBool,
    /// Why the first ruleset is not loaded yet.
    waiting: Mutex<String>,
    /// The parts of the source that cannot read their input, with the reason.
    source_problems: Mutex<BTreeMap<String, String>>,
    /// The invalid inputs, one line each.
    problems: Mutex<String>,
    /// The names learned from DNS replies, as a hosts-style file (`/learned`).
    learned: Mutex<String>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("palisade");
        let m = Metrics {
            objects: Family::default(),
            invalid_texts: Gauge::default(),
            stand_ins: Gauge::default(),
            ruleset: Family::default(),
            // 1 ms .. ~16 s
            reconcile_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            time_to_apply_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            reconcile_errors: Counter::default(),
            connections_cut: Counter::default(),
            decision_log_dropped: Counter::default(),
            decisions: Family::default(),
            source_unavailable: Family::default(),
            dns_replies: Family::default(),
            dns_learned: Counter::default(),
            dns_evicted: Counter::default(),
            dns_addresses: Gauge::default(),
            // 10 µs .. ~160 ms
            dns_hold_seconds: Histogram::new(exponential_buckets(0.000_01, 2.0, 15)),
            loaded: AtomicBool::new(false),
            waiting: Mutex::new("waiting for the first full listing".into()),
            source_problems: Mutex::new(BTreeMap::new()),
            problems: Mutex::new(String::new()),
            learned: Mutex::new(String::new()),
            registry: Registry::default(),
        };
        registry.register("objects", "Objects in force, by kind", m.objects.clone());
        registry.register(
            "invalid_texts",
            "Files or objects with validation errors (their last valid versions, or fail-closed stand-ins, stay in force)",
            m.invalid_texts.clone(),
        );
        registry.register(
            "stand_in_policies",
            "Invalid new policies enforced as isolation of their subject",
            m.stand_ins.clone(),
        );
        registry.register(
            "ruleset",
            "Size of the nftables ruleset in the kernel (chains, rules, set_elements, map_elements, exempt_elements)",
            m.ruleset.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time to apply one batch of changes: engine, compile and kernel transaction",
            m.reconcile_seconds.clone(),
        );
        registry.register(
            "time_to_apply_seconds",
            "From an object change reaching the agent to its kernel transaction committed",
            m.time_to_apply_seconds.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed (the previous ruleset stayed in force)",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "connections_cut",
            "Tracked connections deleted because a change forbids them",
            m.connections_cut.clone(),
        );
        registry.register(
            "decision_packets",
            "Packets the kernel's logged rules matched since their chain was last loaded, by decision (drops and admin decisions)",
            m.decisions.clone(),
        );
        registry.register(
            "decision_log_dropped_lines",
            "Decision-log lines not written because their source address exceeded the rate limit",
            m.decision_log_dropped.clone(),
        );
        registry.register(
            "source_unavailable",
            "1 while a part of the source cannot read its input (every object it sent stays in force), by part",
            m.source_unavailable.clone(),
        );
        registry.register(
            "dns_replies",
            "DNS replies from trusted resolvers read by the agent, by outcome (learned: a name some domainNames peer matches; ignored: no peer matches it; undecodable; unsent: held and not sent on, also counted under its first outcome)",
            m.dns_replies.clone(),
        );
        registry.register(
            "dns_learned_addresses",
            "Addresses learned for domain names (an address counts again once it expired)",
            m.dns_learned.clone(),
        );
        registry.register(
            "dns_evicted_addresses",
            "Learned addresses forgotten because their DNS answer's TTL (clamped) ran out",
            m.dns_evicted.clone(),
        );
        registry.register(
            "dns_known_addresses",
            "Addresses known for domain names now",
            m.dns_addresses.clone(),
        );
        registry.register(
            "dns_hold_seconds",
            "Time a held DNS reply spent in the agent: from its log message read to its answer's addresses in the kernel and the reply sent on",
            m.dns_hold_seconds.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Counts a DNS reply read, by outcome (`learned`, `ignored`, `undecodable`).
    pub fn dns_reply(&self, outcome: &str) {
        self.dns_replies
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc();
    }

    /// Records addresses newly learned, forgotten, and known now.
    pub fn dns_addresses(&self, learned: usize, evicted: usize, known: usize) {
        self.dns_learned.inc_by(learned as u64);
        self.dns_evicted.inc_by(evicted as u64);
        self.dns_addresses.set(known as i64);
    }

    /// Replaces the names learned from DNS replies (a hosts-style file).
    pub fn set_learned(&self, hosts: String) {
        *lock(&self.learned) = hosts;
    }

    /// The names learned from DNS replies, as a hosts-style file `--dns` reads.
    pub fn learned(&self) -> String {
        lock(&self.learned).clone()
    }

    /// Records how long a held reply stayed in the agent.
    pub fn dns_held(&self, seconds: f64) {
        self.dns_hold_seconds.observe(seconds);
    }

    /// Records the store's object counts and problems.
    pub fn objects(&self, store: &Store) {
        self.objects.clear();
        for (kind, n) in store.counts() {
            self.objects
                .get_or_create(&vec![("kind".into(), kind.into())])
                .set(n as i64);
        }
        self.invalid_texts.set(store.problems().len() as i64);
        self.stand_ins.set(store.stand_ins() as i64);
        let mut detail = String::new();
        for diags in store.problems().values() {
            for d in diags {
                detail += &format!("{d}\n");
            }
        }
        *lock(&self.problems) = detail;
    }

    /// Records whether a part of the source can read its input.
    pub fn source_health(&self, part: &str, problem: Option<&str>) {
        let labels = vec![("part".to_string(), escape_label_value(part))];
        let mut problems = lock(&self.source_problems);
        match problem {
            Some(p) => {
                problems.insert(part.to_string(), p.to_string());
                self.source_unavailable.get_or_create(&labels).set(1);
            }
            None => {
                problems.remove(part);
                self.source_unavailable.get_or_create(&labels).set(0);
            }
        }
    }

    /// Records the size of the ruleset now in the kernel.
    pub fn ruleset(&self, r: &Ruleset) {
        let c = r.counts();
        for (what, n) in [
            ("chains", c.chains),
            ("rules", c.rules),
            ("set_elements", c.set_elements),
            ("map_elements", c.map_elements),
            ("exempt_elements", c.exempt_elements),
        ] {
            self.ruleset
                .get_or_create(&vec![("object".into(), what.into())])
                .set(n as i64);
        }
    }

    /// Records a committed transaction: the time from `seen` (the change reaching the
    /// agent) to now, and readiness.
    pub fn applied(&self, seen: Instant) {
        self.time_to_apply_seconds
            .observe(seen.elapsed().as_secs_f64());
        self.loaded.store(true, Ordering::Relaxed);
    }

    /// Records one reconcile: its duration and, when it failed, the error.
    pub fn reconciled<T>(&self, start: Instant, result: &Result<T, NftError>) {
        self.reconcile_seconds
            .observe(start.elapsed().as_secs_f64());
        if let Err(e) = result {
            self.reconcile_errors.inc();
            if !self.loaded.load(Ordering::Relaxed) {
                *lock(&self.waiting) = format!("first ruleset not loaded: {e}");
            }
        }
    }

    /// Counts connections deleted after a change.
    pub fn connections_cut(&self, n: usize) {
        self.connections_cut.inc_by(n as u64);
    }

    /// Counts a decision-log line dropped by the rate limit.
    pub fn decision_log_dropped(&self) {
        self.decision_log_dropped.inc();
    }

    /// Replaces the decision counters with the kernel's current ones.
    pub fn decisions(&self, counts: &HashMap<Labels, u64>) {
        self.decisions.clear();
        for (labels, n) in counts {
            let labels: Labels = labels
                .iter()
                .map(|(k, v)| (k.clone(), escape_label_value(v)))
                .collect();
            self.decisions.get_or_create(&labels).set(*n as i64);
        }
    }

    /// Whether the first full listing is in the kernel and the source can read its input.
    pub fn ready(&self) -> bool {
        self.loaded.load(Ordering::Relaxed) && lock(&self.source_problems).is_empty()
    }

    /// The readiness detail: why not ready, and the invalid objects (ready or not).
    pub fn detail(&self) -> String {
        let mut out = String::new();
        if !self.loaded.load(Ordering::Relaxed) {
            out += &lock(&self.waiting);
            out.push('\n');
        }
        for (part, problem) in lock(&self.source_problems).iter() {
            out += &format!(
                "source {part} cannot read its input (its objects stay in force): {problem}\n"
            );
        }
        out += &lock(&self.problems);
        out
    }

    /// The metrics in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule name with a quote, a backslash and a newline stays inside its label value: no
    /// forged series, no early `# EOF`.
    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new();
        let name = "x\"} 1\n# EOF\npalisade_forged{a=\"\\";
        let labels = vec![("rule_name".to_string(), name.to_string())];
        m.decisions(&HashMap::from([(labels, 7)]));
        let text = m.encode();
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("palisade_decision_packets{"))
            .collect();
        assert_eq!(
            lines,
            [r#"palisade_decision_packets{rule_name="x\"} 1\n# EOF\npalisade_forged{a=\"\\"} 7"#],
            "{text}"
        );
        assert_eq!(text.lines().filter(|l| *l == "# EOF").count(), 1, "{text}");
        assert!(!text.contains("\npalisade_forged"), "{text}");
    }

    /// Loaded and the source readable: ready, with no stale "waiting" line.
    #[test]
    fn readiness_follows_the_first_load_and_the_source() {
        let m = Metrics::new();
        assert!(!m.ready());
        assert!(m.detail().contains("waiting"));
        m.applied(Instant::now());
        assert!(m.ready());
        assert!(!m.detail().contains("waiting"), "{}", m.detail());
        m.source_health("dir:/x", Some("No such file or directory"));
        assert!(!m.ready());
        assert!(m.detail().contains("No such file"), "{}", m.detail());
        m.source_health("dir:/x", None);
        assert!(m.ready());
    }
}
