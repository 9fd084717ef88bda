//! The project's quotas, checked before the first write: a plan that would not fit is
//! refused with the numbers (quota, used, needed) and what to raise, instead of failing
//! half-way.

use serde::Serialize;
use serde_json::Value;

use crate::apply::planned_rule_creations;
use crate::client::{ApiError, Client};
use crate::plan::Plan;
use crate::state::query_escape;

/// A resource the plan needs more of than the quota leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shortfall {
    /// Neutron's name of the resource (`security_group`, `security_group_rule`).
    pub resource: &'static str,
    /// The project's quota.
    pub limit: i64,
    /// In use (and reserved) now.
    pub used: i64,
    /// The most the plan adds at any moment of the sync.
    pub needed: i64,
}

impl std::fmt::Display for Shortfall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: quota {}, used {}, needed {} more: raise the quota to at least {}",
            self.resource,
            self.limit,
            self.used,
            self.needed,
            self.used + self.needed
        )
    }
}

/// A resource's quota and use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// The quota (negative: unlimited).
    pub limit: i64,
    /// In use and reserved.
    pub used: i64,
}

/// Reads the project's quota and use of `resource` (`GET /quotas/<project>/details`).
pub fn usage(client: &Client, resource: &str) -> Result<Usage, ApiError> {
    let path = format!("quotas/{}/details", query_escape(client.project_id()));
    let v = client.get(&path)?;
    parse_usage(&v, resource).ok_or_else(|| ApiError::Decode {
        method: "GET",
        path,
        message: format!("no quota for {resource}"),
    })
}

fn parse_usage(v: &Value, resource: &str) -> Option<Usage> {
    let r = &v["quota"][resource];
    Some(Usage {
        limit: r["limit"].as_i64()?,
        used: r["used"].as_i64()? + r["reserved"].as_i64().unwrap_or(0),
    })
}

/// The most groups and rules the plan adds at any moment: new groups count from phase 1
/// on (deleted groups go last); rules peak either in phase 1 (each new group first comes
/// with Neutron's two default rules, then gets its own) or after phase 5 (phase 2 deleted
/// rules, phase 5 added some).
pub fn needed(plan: &Plan) -> [(&'static str, i64); 2] {
    let groups = plan.create_groups.len() as i64;
    let (defaults, created) = plan
        .create_groups
        .iter()
        .map(planned_rule_creations)
        .fold((0, 0), |(d, c), (kept, made)| (d + 2, c + kept + made));
    let after_phase_1 = i64::max(defaults, created as i64);
    let at_end = created as i64 - plan.delete_rules.len() as i64 + plan.add_rules.len() as i64;
    [
        ("security_group", groups),
        ("security_group_rule", after_phase_1.max(at_end)),
    ]
}

/// Refuses a plan that would not fit the project's quotas: reads them only when the plan
/// adds something.
pub fn check(client: &Client, plan: &Plan) -> Result<Vec<Shortfall>, ApiError> {
    let mut out = Vec::new();
    for (resource, needed) in needed(plan) {
        if needed <= 0 {
            continue;
        }
        let u = usage(client, resource)?;
        if u.limit >= 0 && u.used + needed > u.limit {
            out.push(Shortfall {
                resource,
                limit: u.limit,
                used: u.used,
                needed,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_counts_reservations() {
        let v =
            json!({"quota": {"security_group_rule": {"limit": 100, "used": 40, "reserved": 2}}});
        assert_eq!(
            parse_usage(&v, "security_group_rule"),
            Some(Usage {
                limit: 100,
                used: 42
            })
        );
        assert_eq!(parse_usage(&v, "security_group"), None, "absent");
    }

    #[test]
    fn shortfalls_name_what_to_raise() {
        let s = Shortfall {
            resource: "security_group_rule",
            limit: 10,
            used: 8,
            needed: 5,
        };
        assert_eq!(
            s.to_string(),
            "security_group_rule: quota 10, used 8, needed 5 more: raise the quota to at least 13"
        );
    }
}
