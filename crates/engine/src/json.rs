//! The serde form of verdicts: `eval -o json`, `explain -o json` and the nftables log map
//! all print these, so every tool reads one shape.
//!
//! A side is `{"allowed", "tier", ...}` plus, by decision: the rule (`policy`, `rule`,
//! `action`, `failClosed`); `reason` (`External`, `Host`, `SamePod`, `NodeLocal`,
//! `IsolatedNoRuleMatched` with `isolating`, or `NoPolicy`); and `passedBy` when Pass rules
//! sent the evaluation on.

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::verdict::{Decision, PolicyInfo, RuleMatch, SideVerdict, Tier, Verdict};

impl Serialize for Tier {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// `{"kind", "namespace", "name", "priority"?, "origin"?: {"file", "line"}}`.
impl Serialize for PolicyInfo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("kind", self.reference.kind.as_str())?;
        m.serialize_entry("namespace", &self.reference.namespace)?;
        m.serialize_entry("name", &self.reference.name)?;
        if let Some(p) = self.priority {
            m.serialize_entry("priority", &p)?;
        }
        if let Some(o) = &self.origin {
            m.serialize_entry("origin", &Origin(o))?;
        }
        m.end()
    }
}

/// A list of policies, as an array of [`PolicyInfo`]s.
pub struct Policies<'a>(pub &'a [std::sync::Arc<PolicyInfo>]);

impl Serialize for Policies<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|p| &**p))
    }
}

struct Origin<'a>(&'a palisade_model::Origin);

impl Serialize for Origin<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("file", &*self.0.file)?;
        m.serialize_entry("line", &self.0.line)?;
        m.end()
    }
}

/// The entries a matched rule adds to a map.
fn rule_entries<M: SerializeMap>(m: &mut M, r: &RuleMatch) -> Result<(), M::Error> {
    m.serialize_entry("policy", &*r.policy)?;
    m.serialize_entry("direction", r.direction.as_str())?;
    m.serialize_entry("rule", &RuleId(r))?;
    m.serialize_entry("action", r.action_name())?;
    m.serialize_entry("failClosed", &r.fail_closed)
}

/// A matched rule's place in its policy: `{"index", "name"}`.
pub struct RuleId<'a>(pub &'a RuleMatch);

impl Serialize for RuleId<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("index", &self.0.index)?;
        m.serialize_entry("name", &self.0.rule_name())?;
        m.end()
    }
}

/// `{"policy", "direction", "rule": {"index", "name"}, "action", "failClosed"}`.
impl Serialize for RuleMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        rule_entries(&mut m, self)?;
        m.end()
    }
}

/// The entries a decision adds to a map.
fn decision_entries<M: SerializeMap>(m: &mut M, d: &Decision) -> Result<(), M::Error> {
    match d {
        Decision::Exempt(e) => m.serialize_entry("reason", e.as_str()),
        Decision::Rule(r) => rule_entries(m, r),
        Decision::Isolated(by) => {
            m.serialize_entry("reason", "IsolatedNoRuleMatched")?;
            m.serialize_entry("isolating", &Policies(by))
        }
        Decision::NoPolicy => m.serialize_entry("reason", "NoPolicy"),
        Decision::SharedAddress(ip) => {
            m.serialize_entry("reason", "SharedAddress")?;
            m.serialize_entry("address", ip)
        }
    }
}

/// A decision alone: the rule's fields, or `reason` (and `isolating`).
impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        decision_entries(&mut m, self)?;
        m.end()
    }
}

impl Serialize for SideVerdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("allowed", &self.allowed)?;
        m.serialize_entry("tier", &self.tier)?;
        decision_entries(&mut m, &self.decision)?;
        if !self.passes.is_empty() {
            m.serialize_entry("passedBy", &self.passes)?;
        }
        m.end()
    }
}

/// `{"allowed", "egress": side, "ingress": side}`.
impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("allowed", &self.allowed)?;
        m.serialize_entry("egress", &self.egress)?;
        m.serialize_entry("ingress", &self.ingress)?;
        m.end()
    }
}
