//! The serde form of explanations and port segments (`explain -o json`): the verdicts in
//! them keep the engine's own shape.

use palisade_engine::json::{Policies, RuleId};
use palisade_engine::{PeerWhy, Tier};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::explain::{
    Explanation, NamedEndpoint, PolicyMisses, PolicyOutcome, PolicyStep, SideWalk, TierStep,
};
use crate::ports::PortSegment;
use crate::whynot::{PeerMiss, PortMiss, RuleMiss};

impl Serialize for NamedEndpoint {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("ip", &self.ip)?;
        m.end()
    }
}

/// `{"policy", "outcome": "Matched"|"NoRuleMatched"|"NotReached", "rule"?}`.
impl Serialize for PolicyStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("policy", &*self.policy)?;
        match &self.outcome {
            PolicyOutcome::Matched(r) => {
                m.serialize_entry("outcome", "Matched")?;
                m.serialize_entry("rule", &RuleId(r))?;
                m.serialize_entry("action", r.action_name())?;
                m.serialize_entry("failClosed", &r.fail_closed)?;
            }
            PolicyOutcome::NoRuleMatched => {
                m.serialize_entry("outcome", "NoRuleMatched")?;
                m.serialize_entry("whyNot", &self.misses)?;
            }
            PolicyOutcome::NotReached => m.serialize_entry("outcome", "NotReached")?,
        }
        m.end()
    }
}

/// `{"tier": "Admin"|"Baseline", "policies": [...]}` or
/// `{"tier": "NetworkPolicy", "isolated": bool, "isolatedBy": [...], "whyNot"?: [...]}`.
impl Serialize for TierStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            TierStep::AdminTier { tier, policies } => {
                m.serialize_entry("tier", tier)?;
                m.serialize_entry("policies", policies)?;
            }
            TierStep::NetworkPolicyTier {
                isolated_by,
                misses,
            } => {
                m.serialize_entry("tier", &Tier::NetworkPolicy)?;
                m.serialize_entry("isolated", &!isolated_by.is_empty())?;
                m.serialize_entry("isolatedBy", &Policies(isolated_by))?;
                if !misses.is_empty() {
                    m.serialize_entry("whyNot", misses)?;
                }
            }
        }
        m.end()
    }
}

struct Steps<'a>(&'a SideWalk);

impl Serialize for Steps<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.steps.len()))?;
        for step in &self.0.steps {
            seq.serialize_element(step)?;
        }
        seq.end()
    }
}

struct Walks<'a>(&'a Explanation);

impl Serialize for Walks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("egress", &Steps(&self.0.egress))?;
        m.serialize_entry("ingress", &Steps(&self.0.ingress))?;
        m.end()
    }
}

/// `{"from", "to", "protocol", "port", "allowed", "egress", "ingress", "walk": {"egress": [...], "ingress": [...]}}`:
/// the verdict's own fields, plus the tiers each side went through.
impl Serialize for Explanation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("from", &self.from)?;
        m.serialize_entry("to", &self.to)?;
        m.serialize_entry("protocol", self.protocol.as_str())?;
        m.serialize_entry("port", &self.port)?;
        m.serialize_entry("allowed", &self.verdict.allowed)?;
        m.serialize_entry("egress", &self.verdict.egress)?;
        m.serialize_entry("ingress", &self.verdict.ingress)?;
        m.serialize_entry("walk", &Walks(self))?;
        m.end()
    }
}

/// `{"index", "name", "ports": [{"port", "reason"}], "peers": [{"peer", "reason", "except"?}]}`.
impl Serialize for RuleMiss {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("index", &self.index)?;
        m.serialize_entry("name", &self.name)?;
        m.serialize_entry("ports", &self.ports)?;
        m.serialize_entry("peers", &self.peers)?;
        m.end()
    }
}

impl Serialize for PortMiss {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("port", &self.port)?;
        m.serialize_entry("reason", self.why.as_str())?;
        m.end()
    }
}

impl Serialize for PeerMiss {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("peer", &self.peer)?;
        m.serialize_entry("reason", self.why.as_str())?;
        if let PeerWhy::Excepted(net) = &self.why {
            m.serialize_entry("except", &net.to_string())?;
        }
        m.end()
    }
}

/// `{"policy", "rules": [...]}`.
impl Serialize for PolicyMisses {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("policy", &*self.policy)?;
        m.serialize_entry("rules", &self.rules)?;
        m.end()
    }
}

/// `{"protocol", "ports": "8080-8090", "allowed", "egress", "ingress"}`: a run of ports and
/// its verdict.
impl Serialize for PortSegment {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("protocol", self.protocol.as_str())?;
        m.serialize_entry("ports", &self.range.to_string())?;
        m.serialize_entry("allowed", &self.verdict.allowed)?;
        m.serialize_entry("egress", &self.verdict.egress)?;
        m.serialize_entry("ingress", &self.verdict.ingress)?;
        m.end()
    }
}
