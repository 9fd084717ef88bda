//! Lint: policies that are valid but likely not what their author meant — equal priorities
//! with overlapping subjects, rules that can never decide, NetworkPolicies the admin tier
//! overrides, selectors that select nothing, egress isolation without DNS, Services whose
//! endpoints' policies refuse their clients.
//!
//! Every finding is computed from the engine's compiled sets and its own decisions on a
//! universe of representative flows (one per class of pods, CIDR region and port
//! interval the policies distinguish), never by matching text. A [`Finding`] has a
//! stable [`Code`], a [`Severity`], the object and field it is about (file and line when
//! known), a one-line message and a fix.

mod dns;
mod domains;
mod lines;
mod order;
mod sarif;
mod selection;
mod services;
mod suppress;

use std::fmt;

pub use lines::ObjectLines;
use palisade_model::{AdminPolicy, Diagnostic, Direction, NetworkPolicy, Origin};
pub use sarif::{LINT_DOCS, SarifLog, help_uri, sarif};
use serde::Serialize;
pub use suppress::{
    Baseline, IGNORE_ANNOTATION, Ignore, SuppressedBy, Suppression, suppress_annotated,
};

use crate::Analysis;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Probably a mistake.
    Warning,
    /// Certainly wrong.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// What a finding is about; each has a stable identifier (`PAL001`) and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// An object the API server would refuse (reported by the loader).
    InvalidObject,
    /// Two admin policies of one tier with equal priority whose subjects overlap.
    SamePriorityOverlap,
    /// A NetworkPolicy rule every connection of which the admin tier decides first.
    OverriddenRule,
    /// A NetworkPolicy rule some connections of which the admin tier decides first.
    PartlyOverriddenRule,
    /// An admin rule that never decides: earlier rules of its tier match all it matches.
    ShadowedRule,
    /// A NetworkPolicy rule whose connections earlier rules of its policy all allow.
    RedundantRule,
    /// A Pass rule with nothing below it to pass to: it acts as Allow.
    PassToNothing,
    /// A policy whose subject selects no pod.
    EmptySubject,
    /// A rule peer that selects nothing.
    EmptyPeer,
    /// A named port no container port resolves.
    UnresolvedNamedPort,
    /// An ipBlock or networks CIDR that contains pod addresses.
    CidrContainsPods,
    /// Pods isolated for egress that can reach no DNS server.
    EgressWithoutDns,
    /// The input has no pods: the checks that need them were skipped.
    NoPods,
    /// An object the API server accepts but that is likely a mistake (from the loader).
    SuspiciousInput,
    /// NetworkPolicy rules of a direction its policyTypes does not list: they are ignored.
    IgnoredRules,
    /// A NetworkPolicy rule that names a Service's port where the target port is meant.
    ServicePortInPolicy,
    /// A Service port whose endpoints no client may reach.
    ServiceUnreachable,
    /// A Service port some client reaches on only some of its endpoints.
    ServicePartlyAdmitted,
    /// A Service whose selector matches no pod.
    ServiceSelectsNothing,
    /// A `domainNames` entry with a label starting with a character the CRD's pattern
    /// admits only by accident.
    DomainPatternAccident,
    /// A `domainNames` entry no name of the DNS map matches.
    UnresolvedDomain,
    /// A `domainNames` entry whose addresses a `networks` rule of the same policy holds.
    DomainNetworkOverlap,
}

impl Code {
    /// Every code, in identifier order.
    pub const ALL: [Code; 22] = [
        Code::InvalidObject,
        Code::SamePriorityOverlap,
        Code::OverriddenRule,
        Code::PartlyOverriddenRule,
        Code::ShadowedRule,
        Code::RedundantRule,
        Code::PassToNothing,
        Code::EmptySubject,
        Code::EmptyPeer,
        Code::UnresolvedNamedPort,
        Code::CidrContainsPods,
        Code::EgressWithoutDns,
        Code::NoPods,
        Code::SuspiciousInput,
        Code::IgnoredRules,
        Code::ServicePortInPolicy,
        Code::ServiceUnreachable,
        Code::ServicePartlyAdmitted,
        Code::ServiceSelectsNothing,
        Code::DomainPatternAccident,
        Code::UnresolvedDomain,
        Code::DomainNetworkOverlap,
    ];

    /// The stable identifier: `PAL000`…
    pub fn id(self) -> &'static str {
        match self {
            Code::InvalidObject => "PAL000",
            Code::SamePriorityOverlap => "PAL001",
            Code::OverriddenRule => "PAL002",
            Code::PartlyOverriddenRule => "PAL003",
            Code::ShadowedRule => "PAL004",
            Code::RedundantRule => "PAL005",
            Code::PassToNothing => "PAL006",
            Code::EmptySubject => "PAL007",
            Code::EmptyPeer => "PAL008",
            Code::UnresolvedNamedPort => "PAL009",
            Code::CidrContainsPods => "PAL010",
            Code::EgressWithoutDns => "PAL011",
            Code::NoPods => "PAL012",
            Code::SuspiciousInput => "PAL013",
            Code::IgnoredRules => "PAL014",
            Code::ServicePortInPolicy => "PAL015",
            Code::ServiceUnreachable => "PAL016",
            Code::ServicePartlyAdmitted => "PAL017",
            Code::ServiceSelectsNothing => "PAL018",
            Code::DomainPatternAccident => "PAL019",
            Code::UnresolvedDomain => "PAL020",
            Code::DomainNetworkOverlap => "PAL021",
        }
    }

    /// The stable name: `same-priority-overlap`…
    pub fn name(self) -> &'static str {
        match self {
            Code::InvalidObject => "invalid-object",
            Code::SamePriorityOverlap => "same-priority-overlap",
            Code::OverriddenRule => "overridden-rule",
            Code::PartlyOverriddenRule => "partly-overridden-rule",
            Code::ShadowedRule => "shadowed-rule",
            Code::RedundantRule => "redundant-rule",
            Code::PassToNothing => "pass-to-nothing",
            Code::EmptySubject => "empty-subject",
            Code::EmptyPeer => "empty-peer",
            Code::UnresolvedNamedPort => "unresolved-named-port",
            Code::CidrContainsPods => "cidr-contains-pods",
            Code::EgressWithoutDns => "egress-without-dns",
            Code::NoPods => "no-pods",
            Code::SuspiciousInput => "suspicious-input",
            Code::IgnoredRules => "ignored-rules",
            Code::ServicePortInPolicy => "service-port-in-policy",
            Code::ServiceUnreachable => "service-unreachable",
            Code::ServicePartlyAdmitted => "service-partly-admitted",
            Code::ServiceSelectsNothing => "service-selects-nothing",
            Code::DomainPatternAccident => "domain-pattern-accident",
            Code::UnresolvedDomain => "unresolved-domain",
            Code::DomainNetworkOverlap => "domain-network-overlap",
        }
    }

    /// The severity its findings usually have.
    pub fn severity(self) -> Severity {
        match self {
            Code::InvalidObject => Severity::Error,
            Code::PartlyOverriddenRule | Code::RedundantRule | Code::NoPods => Severity::Info,
            _ => Severity::Warning,
        }
    }

    /// One sentence on what the code reports (the documentation of its rule).
    pub fn summary(self) -> &'static str {
        match self {
            Code::InvalidObject => "The object is invalid: the API server would refuse it.",
            Code::SamePriorityOverlap => {
                "Admin policies of one tier with equal priority select the same pods; upstream leaves their order to the implementation."
            }
            Code::OverriddenRule => {
                "The admin tier decides every connection this NetworkPolicy rule allows: the rule has no effect."
            }
            Code::PartlyOverriddenRule => {
                "The admin tier decides some of the connections this NetworkPolicy rule allows."
            }
            Code::ShadowedRule => {
                "Earlier rules of the same tier match every connection this rule matches: it never decides."
            }
            Code::RedundantRule => {
                "Earlier rules of the same NetworkPolicy allow every connection this rule allows."
            }
            Code::PassToNothing => {
                "A Pass rule whose subject pods have nothing below to pass to: it acts as Allow."
            }
            Code::EmptySubject => "The policy's subject selects no pod.",
            Code::EmptyPeer => "A rule peer selects no namespace, pod or node.",
            Code::UnresolvedNamedPort => {
                "A named port that no container port of the pods it resolves against declares."
            }
            Code::CidrContainsPods => {
                "An ipBlock or networks CIDR contains pod addresses: it applies to those pods too."
            }
            Code::EgressWithoutDns => {
                "Pods isolated for egress cannot reach any DNS server: they can no longer resolve names."
            }
            Code::NoPods => {
                "The input has no pods, so the checks that need the cluster's pods were skipped."
            }
            Code::SuspiciousInput => {
                "The API server accepts the object, but it is likely a mistake."
            }
            Code::IgnoredRules => {
                "The NetworkPolicy has rules for a direction its policyTypes does not list: they are ignored."
            }
            Code::ServicePortInPolicy => {
                "A NetworkPolicy rule admits a Service's port but not the target port its endpoints receive the connection on: policy is decided after the Service's DNAT."
            }
            Code::ServiceUnreachable => {
                "No client (pod, node or outside address) may reach any endpoint of the Service port."
            }
            Code::ServicePartlyAdmitted => {
                "Some client reaches only some of the Service port's endpoints: its connections fail depending on the endpoint chosen."
            }
            Code::ServiceSelectsNothing => {
                "The Service's selector matches no pod: it has no endpoint."
            }
            Code::DomainPatternAccident => {
                "A domainNames entry starts a label with a character the CRD's pattern admits only by accident."
            }
            Code::UnresolvedDomain => {
                "No name of the DNS map matches a domainNames entry: offline, it allows no address."
            }
            Code::DomainNetworkOverlap => {
                "A domainNames entry's addresses are also held by a networks rule of the same policy."
            }
        }
    }

    /// The code with this identifier or name.
    pub fn parse(s: &str) -> Option<Code> {
        Code::ALL.into_iter().find(|c| c.id() == s || c.name() == s)
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.id(), self.name())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What it is about.
    pub code: Code,
    /// How much it matters.
    pub severity: Severity,
    /// The object, as `Kind namespace/name` (empty for the input as a whole).
    pub object: String,
    /// The object's namespace (NetworkPolicies): the developer view filters on it.
    pub namespace: Option<String>,
    /// The file it was read from.
    pub file: Option<String>,
    /// The line (of the object, or of the field once [`ObjectLines::refine`] ran); 0 when
    /// unknown.
    pub line: usize,
    /// The field path inside the object (`spec.ingress[0].from[1].namespaceSelector`).
    pub field: String,
    /// What is wrong, in one line.
    pub message: String,
    /// How to fix it, in one line.
    pub fix: String,
    /// Set when an annotation or the baseline accepts it: it does not count for `--fail-on`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<Suppression>,
}

/// `policies.yaml:12: warning[PAL001 same-priority-overlap]: AdminNetworkPolicy a:
/// spec.priority: message`, then the fix on its own line.
impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:{}: ", self.line)?;
        }
        write!(f, "{}[{}]: ", self.severity.as_str(), self.code)?;
        if !self.object.is_empty() {
            write!(f, "{}: ", self.object)?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        write!(f, "{}\n  fix: {}", self.message, self.fix)
    }
}

impl Finding {
    /// A finding about an object read at `origin`.
    pub(crate) fn at(
        code: Code,
        object: String,
        origin: Option<&Origin>,
        field: String,
    ) -> Finding {
        Finding {
            code,
            severity: code.severity(),
            object,
            namespace: None,
            file: origin.map(|o| o.file.to_string()),
            line: origin.map_or(0, |o| o.line),
            field,
            message: String::new(),
            fix: String::new(),
            suppressed: None,
        }
    }

    /// A finding about a NetworkPolicy (namespaced: the developer view keeps it).
    pub(crate) fn network(code: Code, np: &NetworkPolicy, field: String) -> Finding {
        let mut f = Finding::at(code, np.reference().to_string(), Some(&np.origin), field);
        f.namespace = Some(np.namespace.clone());
        f
    }

    /// A finding about an admin policy.
    pub(crate) fn admin(code: Code, p: &AdminPolicy, field: String) -> Finding {
        Finding::at(code, p.reference().to_string(), Some(&p.origin), field)
    }

    /// The loader's diagnostic as a finding (`invalid-object` or `suspicious-input`).
    pub fn from_diagnostic(d: &Diagnostic) -> Finding {
        let code = if d.severity == palisade_model::Severity::Error {
            Code::InvalidObject
        } else {
            Code::SuspiciousInput
        };
        let origin = Origin {
            file: d.file.clone(),
            line: d.line,
            fields: None,
        };
        let mut f = Finding::at(code, d.object.clone(), Some(&origin), d.field.clone());
        f.message = d.message.clone();
        f.fix = match code {
            Code::InvalidObject => "correct the field; the API server would refuse the object",
            _ => "check that the field says what you mean",
        }
        .to_string();
        f
    }

    pub(crate) fn says(mut self, message: impl Into<String>, fix: impl Into<String>) -> Finding {
        self.message = message.into();
        self.fix = fix.into();
        self
    }

    pub(crate) fn severity(mut self, severity: Severity) -> Finding {
        self.severity = severity;
        self
    }
}

impl Analysis<'_> {
    /// Every lint finding about the compiled cluster, ordered by file, line and code.
    pub fn lint(&self) -> Vec<Finding> {
        let mut out = Vec::new();
        if self.engine.cluster().pods.is_empty() {
            out.push(Finding::at(Code::NoPods, String::new(), None, String::new()).says(
                "the input has no pods: the selector, override, shadowing and DNS checks work on the cluster's pods and were skipped",
                "lint the policies together with the cluster state (kubectl get namespaces,pods,nodes,services,endpointslices -A -o yaml)",
            ));
        } else {
            let universe = self.universe();
            self.lint_selection(&mut out);
            self.lint_order(&universe, &mut out);
            self.lint_dns(&universe, &mut out);
            self.lint_services(&universe, &mut out);
        }
        self.lint_domains(&mut out);
        sort(&mut out);
        out
    }
}

/// Orders findings by file, line, code and message.
pub fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        (&a.file, a.line, a.code, &a.object, &a.field, &a.message)
            .cmp(&(&b.file, b.line, b.code, &b.object, &b.field, &b.message))
    });
}

/// `f(0) ++ f(1) ++ … ++ f(n - 1)` (in some order), computed on every core.
pub(crate) fn parallel<T: Send>(n: usize, f: impl Fn(usize) -> Vec<T> + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(n.max(1));
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || (t..n).step_by(threads).flat_map(f).collect::<Vec<T>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// `spec.ingress` or `spec.egress`.
pub(crate) fn rules_path(dir: Direction) -> &'static str {
    match dir {
        Direction::Ingress => "spec.ingress",
        Direction::Egress => "spec.egress",
    }
}

/// `from` (ingress) or `to` (egress).
pub(crate) fn peers_key(dir: Direction) -> &'static str {
    match dir {
        Direction::Ingress => "from",
        Direction::Egress => "to",
    }
}

/// `a, b, c and 4 more`: at most `n` names of a list.
pub(crate) fn some(names: &[String], n: usize) -> String {
    let mut s = names.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > n {
        s.push_str(&format!(" and {} more", names.len() - n));
    }
    s
}
