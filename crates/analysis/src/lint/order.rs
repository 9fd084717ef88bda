//! Checks on the order of evaluation: equal admin priorities with overlapping subjects,
//! rules that never decide, NetworkPolicy rules the admin tier overrides, Pass rules with
//! nothing below them. Each is decided on the representative flows of a [`Universe`].

use std::collections::{BTreeMap, BTreeSet};

use palisade_engine::{Endpoint, Engine, PodId, RuleMatch};
use palisade_model::{Action, AdminPeer, AdminTier, Direction};

use super::{Code, Finding, rules_path, some};
use crate::Analysis;
use crate::universe::Universe;

const DIRECTIONS: [Direction; 2] = [Direction::Ingress, Direction::Egress];

/// How often a rule matched and decided, and which rules decided instead (counting stops
/// once the answer is known).
#[derive(Default)]
struct Tally {
    matched: usize,
    decided: usize,
    /// Rules that decided instead, by policy (its address, which the engine holds for its
    /// lifetime) and rule index: formatted once at the end, not once per connection.
    by: BTreeMap<(usize, u32), RuleMatch>,
}

impl Analysis<'_> {
    pub(crate) fn lint_order(&self, universe: &Universe, out: &mut Vec<Finding>) {
        self.lint_same_priority(out);
        self.lint_pass_to_nothing(out);
        let reps: Vec<PodId> = universe
            .representatives()
            .filter(|&p| self.engine.is_subject(p) && self.engine.shared_address(p).is_none())
            .collect();
        let (admins, nps) = (
            self.engine.admin_policies().len(),
            self.engine.network_policies().len(),
        );
        // Policies are independent: shared out across the cores.
        out.extend(super::parallel(admins + nps, |k| {
            let mut found = Vec::new();
            if k < admins {
                self.lint_shadowed(k, &reps, universe, &mut found);
            } else {
                self.lint_np_rules(k - admins, &reps, universe, &mut found);
            }
            found
        }));
    }

    /// Admin policies of one tier with equal priority whose subjects share pods, for a
    /// direction both have rules in.
    fn lint_same_priority(&self, out: &mut Vec<Finding>) {
        let order = &self.engine.admin_order();
        for (a_at, &a) in order.iter().enumerate() {
            for &b in &order[a_at + 1..] {
                let (pa, pb) = (
                    &self.engine.cluster().admin_policies[a as usize],
                    &self.engine.cluster().admin_policies[b as usize],
                );
                if (pa.tier, pa.priority) != (pb.tier, pb.priority) {
                    break;
                }
                let both = DIRECTIONS
                    .iter()
                    .any(|&d| !pa.rules(d).is_empty() && !pb.rules(d).is_empty());
                let mut shared = self.engine.admin_policies()[a as usize].subject.clone();
                shared.intersect(&self.engine.admin_policies()[b as usize].subject);
                if !both || shared.is_empty() {
                    continue;
                }
                let pods: Vec<String> = shared
                    .iter()
                    .map(|p| self.engine.cluster().pods[p].key())
                    .collect();
                let field = if pb.kind == palisade_model::PolicyKind::BaselineAdminNetworkPolicy {
                    "metadata.name"
                } else {
                    "spec.priority"
                };
                out.push(Finding::admin(Code::SamePriorityOverlap, pb, field.into()).says(
                    format!(
                        "priority {} is also the priority of {}, and both select {} pod(s) ({}): upstream leaves their order to the implementation; Palisade evaluates {} first (by kind, then name)",
                        pb.priority,
                        pa.reference(),
                        pods.len(),
                        some(&pods, 3),
                        pa.reference()
                    ),
                    "give one of the two policies a distinct priority, so the order is written down",
                ));
            }
        }
    }

    /// Pass rules whose subject pods have nothing below them in that direction.
    fn lint_pass_to_nothing(&self, out: &mut Vec<Finding>) {
        for (i, p) in self.engine.cluster().admin_policies.iter().enumerate() {
            let subject = &self.engine.admin_policies()[i].subject;
            if subject.is_empty() {
                continue;
            }
            for dir in DIRECTIONS {
                let below = |pod: PodId| match p.tier {
                    AdminTier::Admin => {
                        self.engine.isolated(pod, dir)
                            || !self.engine.policies(pod, dir).baseline.is_empty()
                    }
                    AdminTier::Baseline => {
                        let list = &self.engine.policies(pod, dir).baseline;
                        list.iter()
                            .position(|&k| k as usize == i)
                            .is_some_and(|at| at + 1 < list.len())
                    }
                };
                if subject.pods().any(below) {
                    continue;
                }
                let what = match p.tier {
                    AdminTier::Admin => format!(
                        "no NetworkPolicy isolates its subject pods for {} and no baseline policy applies to them",
                        dir.as_str().to_lowercase()
                    ),
                    AdminTier::Baseline => {
                        "no later baseline policy applies to its subject pods".to_string()
                    }
                };
                for (k, rule) in p.rules(dir).iter().enumerate() {
                    let unsupported = rule
                        .peers
                        .iter()
                        .any(|x| matches!(x, AdminPeer::Unsupported(_)));
                    if rule.action != Action::Pass || unsupported {
                        continue;
                    }
                    out.push(
                        Finding::admin(
                            Code::PassToNothing,
                            p,
                            format!("{}[{k}].action", rules_path(dir)),
                        )
                        .says(
                            format!("Pass hands the connections it matches to the tiers below, but {what}: the rule acts as {}", p.action_name(Action::Allow)),
                            format!("write {} if allowing is intended, or add the policy that should decide below", p.action_name(Action::Allow)),
                        ),
                    );
                }
            }
        }
    }

    /// The rules of admin policy `i` that match connections but never decide one.
    fn lint_shadowed(&self, i: usize, reps: &[PodId], universe: &Universe, out: &mut Vec<Finding>) {
        {
            let p = &self.engine.cluster().admin_policies[i];
            for dir in DIRECTIONS {
                for k in 0..p.rules(dir).len() {
                    let mut t = Tally::default();
                    'reps: for &pod in reps
                        .iter()
                        .filter(|&&r| self.engine.admin_policies()[i].subject.contains(r))
                    {
                        let lists = self.engine.policies(pod, dir);
                        let list = match p.tier {
                            AdminTier::Admin => &lists.admin,
                            AdminTier::Baseline => &lists.baseline,
                        };
                        let compiled = &self.engine.admin_policies()[i].rules(dir)[k];
                        // A fail-closed rule matches every peer.
                        let any = compiled.fail_closed;
                        let keep = move |peer: &Endpoint| {
                            any || compiled
                                .peers
                                .iter()
                                .any(|x| self.engine.admin_peer_matches(x, pod, peer))
                        };
                        // Only towards the peers the rule's peers cover (the others cannot
                        // match it), on every probe.
                        for (src, dst) in self.side_pairs(universe, pod, dir, keep) {
                            for probe in &universe.probes {
                                let flow = probe.flow(src, dst);
                                if self
                                    .engine
                                    .admin_rule_match(i as u32, k, pod, dir, &flow)
                                    .is_none()
                                {
                                    continue;
                                }
                                t.matched += 1;
                                match self.engine.first_admin_match(list, pod, dir, &flow) {
                                    // It decides one connection: it is not shadowed.
                                    Some(m) if is_rule(&m, i, self.engine, k) => {
                                        t.decided += 1;
                                        break 'reps;
                                    }
                                    Some(m) => {
                                        t.by.entry(key(&m)).or_insert(m);
                                    }
                                    None => {}
                                }
                            }
                        }
                    }
                    if t.matched > 0 && t.decided == 0 {
                        let by = names(t.by, |m| m.to_string());
                        out.push(
                            Finding::admin(Code::ShadowedRule, p, format!("{}[{k}]", rules_path(dir)))
                                .says(
                                    format!("the rule never decides: every connection it matches is decided first by {}", some(&by, 2)),
                                    "delete the rule, or move it (or its policy's priority) before the rules that shadow it",
                                ),
                        );
                    }
                }
            }
        }
    }

    /// The rules of NetworkPolicy `i` the admin tier overrides, and those earlier rules of
    /// the same policy make redundant.
    fn lint_np_rules(&self, i: usize, reps: &[PodId], universe: &Universe, out: &mut Vec<Finding>) {
        {
            let np = &self.engine.cluster().network_policies[i];
            for dir in DIRECTIONS.into_iter().filter(|&d| np.policy_types.has(d)) {
                let rules = self.engine.network_policies()[i].rules(dir);
                for k in 0..rules.len() {
                    let (mut over, mut earlier) = (Tally::default(), Tally::default());
                    let subjects: Vec<PodId> = reps
                        .iter()
                        .copied()
                        .filter(|&r| self.engine.network_policies()[i].subject.contains(r))
                        .collect();
                    let any_admin = subjects
                        .iter()
                        .any(|&p| !self.engine.policies(p, dir).admin.is_empty());
                    // Everything is known once the rule is seen to decide a connection
                    // itself, and (with admin policies) to be overridden on another.
                    let settled = |over: &Tally, earlier: &Tally| {
                        earlier.decided > 0
                            && over.decided > 0
                            && (!any_admin || !over.by.is_empty())
                    };
                    'reps: for &pod in &subjects {
                        let admin = &self.engine.policies(pod, dir).admin;
                        if admin.is_empty() && earlier.decided > 0 && over.decided > 0 {
                            continue;
                        }
                        let rule = &rules[k];
                        let keep = move |peer: &Endpoint| Engine::np_peers_match(rule, peer);
                        for (src, dst) in self.side_pairs(universe, pod, dir, keep) {
                            let peer = match dir {
                                Direction::Ingress => &src,
                                Direction::Egress => &dst,
                            };
                            for probe in &universe.probes {
                                let flow = probe.flow(src, dst);
                                if !self.engine.np_rule_matches(&rules[k], peer, &flow) {
                                    continue;
                                }
                                over.matched += 1;
                                earlier.matched += 1;
                                match self.engine.first_admin_match(admin, pod, dir, &flow) {
                                    Some(m) if m.action != Action::Pass => {
                                        over.by.entry((key(&m).0, 0)).or_insert(m);
                                    }
                                    _ => over.decided += 1,
                                }
                                if !rules[..k]
                                    .iter()
                                    .any(|r| self.engine.np_rule_matches(r, peer, &flow))
                                {
                                    earlier.decided += 1;
                                }
                                if settled(&over, &earlier) {
                                    break 'reps;
                                }
                            }
                        }
                    }
                    let field = format!("{}[{k}]", rules_path(dir));
                    let by = names(over.by, |m| m.policy.to_string());
                    if over.matched > 0 && over.decided == 0 {
                        out.push(Finding::network(Code::OverriddenRule, np, field.clone()).says(
                            format!("the admin tier decides every connection this rule allows, before NetworkPolicies are consulted ({}): the rule has no effect", some(&by, 3)),
                            "ask the cluster administrator to Pass this traffic to NetworkPolicies, or delete the rule",
                        ));
                    } else if over.decided < over.matched {
                        out.push(Finding::network(Code::PartlyOverriddenRule, np, field.clone()).says(
                            format!("the admin tier decides some of the connections this rule allows before NetworkPolicies are consulted (for example {})", some(&by, 3)),
                            "check with the cluster administrator which of this traffic the admin policies allow or deny",
                        ));
                    }
                    if earlier.matched > 0 && earlier.decided == 0 {
                        out.push(Finding::network(Code::RedundantRule, np, field).says(
                            "earlier rules of this policy already allow every connection this rule allows",
                            "delete the rule, or narrow the earlier rules if this one was meant to be the only allowance",
                        ));
                    }
                }
            }
        }
    }
}

/// A rule match's policy (by address) and rule index.
fn key(m: &RuleMatch) -> (usize, u32) {
    (std::sync::Arc::as_ptr(&m.policy) as usize, m.index)
}

/// The rules (or policies) that decided instead, named, sorted and without repeats.
fn names(
    by: BTreeMap<(usize, u32), RuleMatch>,
    name: impl Fn(&RuleMatch) -> String,
) -> Vec<String> {
    let set: BTreeSet<String> = by.values().map(name).collect();
    set.into_iter().collect()
}

/// Whether `m` is rule `k` of admin policy `i`.
fn is_rule(m: &RuleMatch, i: usize, e: &Engine, k: usize) -> bool {
    std::sync::Arc::ptr_eq(&m.policy, &e.admin_policies()[i].info) && m.index as usize == k
}
