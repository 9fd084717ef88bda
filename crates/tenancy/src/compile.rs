//! Validation and compilation of a [`Config`] into NetworkPolicies and tool labels.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::api::networking::v1 as net;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use palisade_model::validate::{dns_label, label_value, parse_cidr, qualified_name};
use palisade_model::{Diagnostic, NAMESPACE_NAME_LABEL, Severity};

use crate::config::{
    BasePolicy, Config, CustomRule, IpRule, Label, Loc, Located, PortRule, Rule, label_map,
};
use crate::ranges;
use crate::state::State;

/// Label every tool pod carries: the tool's name.
pub const TOOL_LABEL: &str = "tenancy.palisade.io/tool";
/// Prefix of the label that says a policy applies to a tool pod (`<prefix>/<policy id>: "true"`).
pub const POLICY_LABEL_PREFIX: &str = "np.tenancy.palisade.io";
/// Label on every generated NetworkPolicy.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "palisade-tenancy");
/// Annotation naming the tenancy policies a NetworkPolicy implements.
pub const POLICY_ANNOTATION: &str = "tenancy.palisade.io/policies";

/// Compile options: where the platform API runs, for the default base policy.
#[derive(Debug, Clone)]
pub struct Options {
    /// Namespace of the platform API.
    pub platform_namespace: String,
    /// Labels of the platform API pods.
    pub platform_labels: BTreeMap<String, String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            platform_namespace: "thorium".into(),
            platform_labels: [("app".to_string(), "api".to_string())].into(),
        }
    }
}

/// The result of a compile.
#[derive(Debug, Clone)]
pub struct Output {
    /// The NetworkPolicies, in a stable order.
    pub network_policies: Vec<net::NetworkPolicy>,
    /// `group/tool` → the labels its pods must carry.
    pub tool_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// The state to keep for the next compile.
    pub state: State,
    /// Notices (nothing is wrong; worth knowing).
    pub notices: Vec<Diagnostic>,
}

/// The Kubernetes form of a name: lowercase, runs of other characters as `-`, trimmed.
pub fn k8s_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// The id of a policy: a digest of its rules, so renaming a policy does not rename its
/// NetworkPolicies or the labels that select its tools.
fn content_id(ingress: &Option<Vec<Rule>>, egress: &Option<Vec<Rule>>) -> String {
    let text = serde_json::json!({"ingress": ingress, "egress": egress}).to_string();
    format!(
        "{:012x}",
        palisade_model::digest::fnv64(&text) & 0xffff_ffff_ffff
    )
}

/// A base policy's name and rule lists.
type BaseRules = (String, Option<Vec<Rule>>, Option<Vec<Rule>>);

struct Compiler<'c> {
    config: &'c Config,
    errors: Vec<Diagnostic>,
    notices: Vec<Diagnostic>,
    groups: BTreeSet<String>,
    /// tool name → groups it exists in
    tools_by_name: HashMap<String, Vec<String>>,
}

/// Validates `config` (every error collected) and compiles it.
pub fn compile(
    config: &Config,
    options: &Options,
    state: &State,
) -> Result<Output, Vec<Diagnostic>> {
    let mut c = Compiler {
        config,
        errors: Vec::new(),
        notices: Vec::new(),
        groups: BTreeSet::new(),
        tools_by_name: HashMap::new(),
    };
    c.check_groups();
    c.check_tools();
    let policies = c.check_policies();
    let bases = c.check_bases();
    let mut nps: BTreeMap<(String, String), (net::NetworkPolicy, BTreeSet<String>)> =
        BTreeMap::new();
    let base_list: Vec<BaseRules> = if bases.is_empty() {
        let d = default_base(options);
        vec![(d.name, d.ingress, d.egress)]
    } else {
        bases
            .iter()
            .map(|b| {
                (
                    b.value.name.clone(),
                    b.value.ingress.clone(),
                    b.value.egress.clone(),
                )
            })
            .collect()
    };
    for (name, ingress, egress) in &base_list {
        let loc = bases
            .iter()
            .find(|b| &b.value.name == name)
            .map(|b| b.loc.clone());
        for group in c.groups.clone() {
            let id = format!("base-{}", content_id(ingress, egress));
            let selector = LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: TOOL_LABEL.into(),
                    operator: "Exists".into(),
                    values: None,
                }]),
                ..Default::default()
            };
            c.add_np(
                &mut nps,
                &group,
                &id,
                name,
                selector,
                ingress,
                egress,
                loc.as_ref(),
            );
        }
    }
    for p in &policies {
        let id = content_id(&p.value.ingress, &p.value.egress);
        for group in &p.value.groups {
            let selector = LabelSelector {
                match_labels: Some(
                    [(format!("{POLICY_LABEL_PREFIX}/{id}"), "true".to_string())].into(),
                ),
                ..Default::default()
            };
            c.add_np(
                &mut nps,
                group,
                &id,
                &p.value.name,
                selector,
                &p.value.ingress,
                &p.value.egress,
                Some(&p.loc),
            );
        }
    }
    let (tool_labels, new_state) = c.tool_labels(&policies, state);
    if !c.errors.is_empty() {
        return Err(c.errors);
    }
    let network_policies = nps
        .into_values()
        .map(|(mut np, names)| {
            let names: Vec<String> = names.into_iter().collect();
            np.metadata.annotations =
                Some([(POLICY_ANNOTATION.to_string(), names.join(","))].into());
            np
        })
        .collect();
    Ok(Output {
        network_policies,
        tool_labels,
        state: new_state,
        notices: c.notices,
    })
}

/// The Thorium documentation's default base policy, with the platform's namespace and labels.
pub fn default_base(options: &Options) -> BasePolicy {
    let platform = CustomRule {
        namespace_labels: vec![Label {
            key: NAMESPACE_NAME_LABEL.into(),
            value: options.platform_namespace.clone(),
        }],
        pod_labels: options
            .platform_labels
            .iter()
            .map(|(k, v)| Label {
                key: k.clone(),
                value: v.clone(),
            })
            .collect(),
    };
    let dns = |app: &str| CustomRule {
        namespace_labels: vec![Label {
            key: NAMESPACE_NAME_LABEL.into(),
            value: "kube-system".into(),
        }],
        pod_labels: vec![Label {
            key: "k8s-app".into(),
            value: app.into(),
        }],
    };
    BasePolicy {
        name: "thorium-default".into(),
        ingress: Some(vec![Rule {
            allowed_custom: vec![platform.clone()],
            ..Rule::default()
        }]),
        egress: Some(vec![
            Rule {
                allowed_custom: vec![platform],
                ..Rule::default()
            },
            Rule {
                allowed_ips: vec![
                    IpRule {
                        cidr: "169.254.0.0/16".into(),
                        except: vec![],
                    },
                    IpRule {
                        cidr: "fe80::/10".into(),
                        except: vec![],
                    },
                ],
                allowed_custom: vec![dns("kube-dns"), dns("node-local-dns")],
                ports: Some(vec![PortRule {
                    port: 53,
                    end_port: None,
                    protocol: Some("UDP".into()),
                }]),
                ..Rule::default()
            },
        ]),
    }
}

impl Compiler<'_> {
    fn err(&mut self, loc: &Loc, field: &str, msg: impl Into<String>) {
        self.errors.push(loc.error(field, msg));
    }

    fn check_groups(&mut self) {
        for g in &self.config.groups {
            if let Some(e) = dns_label(&g.value) {
                self.errors.push(
                    g.loc
                        .error("", format!("group {e} (a group is a namespace)")),
                );
            }
            if !self.groups.insert(g.value.clone()) {
                self.errors
                    .push(g.loc.error("", format!("duplicate group {:?}", g.value)));
            }
        }
    }

    fn check_tools(&mut self) {
        let mut seen: HashMap<(String, String), ()> = HashMap::new();
        for t in &self.config.tools {
            let tool = &t.value;
            let k = k8s_name(&tool.name);
            if k.is_empty() || label_value(&k).is_some() {
                self.errors.push(t.loc.error("name", format!("tool name {:?} does not make a valid label value (got {k:?}; at most 63 characters)", tool.name)));
            }
            if !self.groups.contains(&tool.group) {
                self.errors.push(
                    t.loc
                        .error("group", format!("group {:?} does not exist", tool.group)),
                );
            }
            if seen.insert((tool.group.clone(), k.clone()), ()).is_some() {
                self.errors.push(t.loc.error(
                    "name",
                    format!(
                        "tool {:?} is not unique in group {:?} (as a Kubernetes name: {k:?})",
                        tool.name, tool.group
                    ),
                ));
            }
            self.tools_by_name
                .entry(tool.name.clone())
                .or_default()
                .push(tool.group.clone());
        }
    }

    fn check_policies(&mut self) -> Vec<Located<crate::config::Policy>> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for p in &self.config.network_policies {
            let policy = &p.value;
            let k = k8s_name(&policy.name);
            if k.is_empty() || dns_label(&k).is_some() {
                self.err(
                    &p.loc,
                    "name",
                    format!(
                        "policy name {:?} does not make a valid Kubernetes name (got {k:?})",
                        policy.name
                    ),
                );
            }
            if policy.groups.is_empty() {
                self.err(
                    &p.loc,
                    "groups",
                    "a policy must belong to at least one group",
                );
            }
            for (i, g) in policy.groups.iter().enumerate() {
                if !self.groups.contains(g) {
                    self.err(
                        &p.loc,
                        &format!("groups[{i}]"),
                        format!("group {g:?} does not exist"),
                    );
                }
                if !seen.insert((g.clone(), k.clone())) {
                    self.err(
                        &p.loc,
                        "name",
                        format!("policy {:?} is not unique in group {g:?}", policy.name),
                    );
                }
            }
            self.check_rules(&p.loc, "ingress", &policy.ingress);
            self.check_rules(&p.loc, "egress", &policy.egress);
            out.push(p.clone());
        }
        out
    }

    fn check_bases(&mut self) -> Vec<Located<BasePolicy>> {
        let mut seen = HashSet::new();
        for b in &self.config.base_network_policies {
            if !seen.insert(b.value.name.clone()) {
                self.err(
                    &b.loc,
                    "name",
                    format!("base policy name {:?} is not unique", b.value.name),
                );
            }
            if b.value.name.trim().is_empty() {
                self.err(&b.loc, "name", "a base policy needs a name");
            }
            self.check_rules(&b.loc, "ingress", &b.value.ingress);
            self.check_rules(&b.loc, "egress", &b.value.egress);
        }
        self.config.base_network_policies.clone()
    }

    fn check_rules(&mut self, loc: &Loc, dir: &str, rules: &Option<Vec<Rule>>) {
        for (i, r) in rules.iter().flatten().enumerate() {
            let path = format!("{dir}[{i}]");
            let mut errs = Vec::new();
            let _ = self.rule(loc, &path, r, &mut errs);
            self.errors.extend(errs);
        }
    }

    /// Converts one rule, reporting its errors: (peers, ports). `None` peers = every peer.
    #[allow(clippy::type_complexity)]
    fn rule(
        &self,
        loc: &Loc,
        path: &str,
        r: &Rule,
        errs: &mut Vec<Diagnostic>,
    ) -> (
        Option<Vec<net::NetworkPolicyPeer>>,
        Option<Vec<net::NetworkPolicyPort>>,
    ) {
        let mut peers = Vec::new();
        for (i, ip) in r.allowed_ips.iter().enumerate() {
            peers.extend(
                self.ip_block(loc, &format!("{path}.allowed_ips[{i}]"), ip, errs)
                    .map(ip_peer),
            );
        }
        for (i, g) in r.allowed_groups.iter().enumerate() {
            if !self.groups.contains(g) {
                errs.push(loc.error(
                    &format!("{path}.allowed_groups[{i}]"),
                    format!("group {g:?} does not exist"),
                ));
            }
            peers.push(namespace_peer(g, None));
        }
        for (i, t) in r.allowed_tools.iter().enumerate() {
            match self.tools_by_name.get(t) {
                None => errs.push(loc.error(
                    &format!("{path}.allowed_tools[{i}]"),
                    format!("tool {t:?} does not exist"),
                )),
                Some(groups) => {
                    for g in groups {
                        peers.push(namespace_peer(
                            g,
                            Some([(TOOL_LABEL.to_string(), k8s_name(t))].into()),
                        ));
                    }
                }
            }
        }
        if r.allowed_local {
            peers.extend(ranges::LOCAL.iter().map(|c| {
                ip_peer(net::IPBlock {
                    cidr: (*c).into(),
                    except: None,
                })
            }));
        }
        if r.allowed_internet {
            for (cidr, except) in [ranges::INTERNET_V4, ranges::INTERNET_V6] {
                peers.push(ip_peer(net::IPBlock {
                    cidr: cidr.into(),
                    except: Some(except.iter().map(|e| (*e).to_string()).collect()),
                }));
            }
        }
        for (i, c) in r.allowed_custom.iter().enumerate() {
            peers.extend(self.custom(loc, &format!("{path}.allowed_custom[{i}]"), c, errs));
        }
        let ports = r.ports.as_ref().map(|ports| {
            ports
                .iter()
                .enumerate()
                .flat_map(|(i, p)| self.port(loc, &format!("{path}.ports[{i}]"), p, errs))
                .collect()
        });
        let peers = if r.allowed_all { None } else { Some(peers) };
        (peers, ports)
    }

    /// "an error occur if any of the CIDR's are not in the allowed CIDR's address space, are
    /// of a different standard (v4 vs v6), or if the cidr above is a single IP address and
    /// except CIDR's were provided".
    fn ip_block(
        &self,
        loc: &Loc,
        path: &str,
        ip: &IpRule,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<net::IPBlock> {
        let (cidr, single) = match parse_net(&ip.cidr) {
            Ok(c) => c,
            Err(e) => {
                errs.push(loc.error(&format!("{path}.cidr"), e));
                return None;
            }
        };
        if single && !ip.except.is_empty() {
            errs.push(loc.error(
                &format!("{path}.except"),
                format!(
                    "{} is a single address: it cannot have except CIDRs",
                    ip.cidr
                ),
            ));
            return None;
        }
        let mut except = Vec::new();
        for (i, e) in ip.except.iter().enumerate() {
            let p = format!("{path}.except[{i}]");
            match parse_net(e) {
                Err(msg) => errs.push(loc.error(&p, msg)),
                Ok((n, _)) if n.addr().is_ipv4() != cidr.addr().is_ipv4() => {
                    errs.push(
                        loc.error(&p, format!("{e} is not the same IP version as {}", ip.cidr)),
                    );
                }
                Ok((n, _)) if !(cidr.contains(&n) && n.prefix_len() > cidr.prefix_len()) => {
                    errs.push(loc.error(&p, format!("{e} is not inside {}", ip.cidr)));
                }
                Ok((n, _)) => except.push(n.to_string()),
            }
        }
        Some(net::IPBlock {
            cidr: cidr.to_string(),
            except: (!except.is_empty()).then_some(except),
        })
    }

    fn custom(
        &self,
        loc: &Loc,
        path: &str,
        c: &CustomRule,
        errs: &mut Vec<Diagnostic>,
    ) -> Option<net::NetworkPolicyPeer> {
        if c.namespace_labels.is_empty() && c.pod_labels.is_empty() {
            errs.push(loc.error(
                path,
                "a custom rule needs namespace_labels, pod_labels or both",
            ));
            return None;
        }
        for (field, labels) in [
            ("namespace_labels", &c.namespace_labels),
            ("pod_labels", &c.pod_labels),
        ] {
            for (i, l) in labels.iter().enumerate() {
                if let Some(e) = qualified_name(&l.key) {
                    errs.push(loc.error(&format!("{path}.{field}[{i}].key"), e));
                }
                if let Some(e) = label_value(&l.value) {
                    errs.push(loc.error(&format!("{path}.{field}[{i}].value"), e));
                }
            }
        }
        // Pod labels alone match those pods in every namespace.
        Some(net::NetworkPolicyPeer {
            namespace_selector: Some(LabelSelector {
                match_labels: non_empty(label_map(&c.namespace_labels)),
                ..Default::default()
            }),
            pod_selector: non_empty(label_map(&c.pod_labels)).map(|m| LabelSelector {
                match_labels: Some(m),
                ..Default::default()
            }),
            ip_block: None,
        })
    }

    /// A port without protocol means all protocols: one entry each for TCP, UDP and SCTP.
    fn port(
        &self,
        loc: &Loc,
        path: &str,
        p: &PortRule,
        errs: &mut Vec<Diagnostic>,
    ) -> Vec<net::NetworkPolicyPort> {
        let mut ok = true;
        if !(1..=65535).contains(&p.port) {
            errs.push(loc.error(
                &format!("{path}.port"),
                format!("port {} is not within 1-65535", p.port),
            ));
            ok = false;
        }
        if let Some(end) = p.end_port {
            if !(1..=65535).contains(&end) {
                errs.push(loc.error(
                    &format!("{path}.end_port"),
                    format!("end_port {end} is not within 1-65535"),
                ));
                ok = false;
            } else if end < p.port {
                errs.push(loc.error(
                    &format!("{path}.end_port"),
                    format!("end_port {end} is lower than port {}", p.port),
                ));
                ok = false;
            }
        }
        let protocols: Vec<&str> = match p.protocol.as_deref() {
            None => vec!["TCP", "UDP", "SCTP"],
            Some(proto @ ("TCP" | "UDP" | "SCTP")) => vec![proto],
            Some(other) => {
                errs.push(loc.error(
                    &format!("{path}.protocol"),
                    format!("protocol {other:?} is not one of TCP, UDP, SCTP"),
                ));
                ok = false;
                vec![]
            }
        };
        if !ok {
            return Vec::new();
        }
        protocols
            .into_iter()
            .map(|proto| net::NetworkPolicyPort {
                protocol: Some(proto.into()),
                port: Some(IntOrString::Int(p.port as i32)),
                end_port: p.end_port.filter(|e| *e != p.port).map(|e| e as i32),
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn add_np(
        &mut self,
        nps: &mut BTreeMap<(String, String), (net::NetworkPolicy, BTreeSet<String>)>,
        group: &str,
        id: &str,
        policy_name: &str,
        pod_selector: LabelSelector,
        ingress: &Option<Vec<Rule>>,
        egress: &Option<Vec<Rule>>,
        loc: Option<&Loc>,
    ) {
        if ingress.is_none() && egress.is_none() {
            return; // restricts nothing in either direction
        }
        let key = (group.to_string(), format!("tenancy-{id}"));
        if let Some((_, names)) = nps.get_mut(&key) {
            names.insert(policy_name.to_string());
            return;
        }
        // Errors were reported by the checks; convert without reporting them again.
        let loc = loc.cloned().unwrap_or_else(Loc::synthetic);
        let convert = |rules: &Option<Vec<Rule>>, dir: &str| {
            rules.as_ref().map(|rules| {
                rules
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| {
                        let (peers, ports) =
                            self.rule(&loc, &format!("{dir}[{i}]"), r, &mut Vec::new());
                        // A rule that names no peer allows nothing: leave it out (the
                        // direction stays isolated by the others).
                        if peers.as_ref().is_some_and(Vec::is_empty) {
                            return None;
                        }
                        Some((peers, ports))
                    })
                    .collect::<Vec<_>>()
            })
        };
        let ing = convert(ingress, "ingress");
        let eg = convert(egress, "egress");
        let mut types = Vec::new();
        if ing.is_some() {
            types.push("Ingress".to_string());
        }
        if eg.is_some() {
            types.push("Egress".to_string());
        }
        let np = net::NetworkPolicy {
            metadata: ObjectMeta {
                name: Some(key.1.clone()),
                namespace: Some(group.to_string()),
                labels: Some([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())].into()),
                ..Default::default()
            },
            spec: Some(net::NetworkPolicySpec {
                pod_selector: Some(pod_selector),
                policy_types: Some(types),
                ingress: ing.map(|rules| {
                    rules
                        .into_iter()
                        .map(|(from, ports)| net::NetworkPolicyIngressRule { from, ports })
                        .collect()
                }),
                egress: eg.map(|rules| {
                    rules
                        .into_iter()
                        .map(|(to, ports)| net::NetworkPolicyEgressRule { to, ports })
                        .collect()
                }),
            }),
        };
        nps.insert(key, (np, [policy_name.to_string()].into()));
    }

    /// Each tool's labels: its name, and one label per policy that applies (explicit,
    /// forced, and default ones — remembered in the state once attached).
    fn tool_labels(
        &mut self,
        policies: &[Located<crate::config::Policy>],
        state: &State,
    ) -> (BTreeMap<String, BTreeMap<String, String>>, State) {
        let mut out = BTreeMap::new();
        let mut new_state = State::default();
        let in_group = |g: &str, name: &str| {
            policies
                .iter()
                .find(|p| p.value.name == name && p.value.groups.iter().any(|x| x == g))
        };
        for t in &self.config.tools {
            let tool = &t.value;
            let key = format!("{}/{}", tool.group, tool.name);
            let mut applied: BTreeSet<String> = BTreeSet::new();
            for (i, name) in tool.network_policies.iter().enumerate() {
                match in_group(&tool.group, name) {
                    Some(p) => {
                        applied.insert(content_id(&p.value.ingress, &p.value.egress));
                    }
                    None => self.errors.push(t.loc.error(
                        &format!("network_policies[{i}]"),
                        format!("policy {name:?} does not exist in group {:?}", tool.group),
                    )),
                }
            }
            for p in policies
                .iter()
                .filter(|p| p.value.forced_policy && p.value.groups.contains(&tool.group))
            {
                applied.insert(content_id(&p.value.ingress, &p.value.egress));
            }
            if tool.network_policies.is_empty() {
                let defaults: Vec<String> = match state.default_attachments.get(&key) {
                    Some(recorded) => recorded.clone(),
                    None => policies
                        .iter()
                        .filter(|p| p.value.default_policy && p.value.groups.contains(&tool.group))
                        .map(|p| p.value.name.clone())
                        .collect(),
                };
                for name in &defaults {
                    match in_group(&tool.group, name) {
                        Some(p) => {
                            applied.insert(content_id(&p.value.ingress, &p.value.egress));
                        }
                        None => self.notices.push(Diagnostic {
                            severity: Severity::Notice,
                            ..t.loc.error("", format!("default policy {name:?} recorded for this tool no longer exists in group {:?}; not applied", tool.group))
                        }),
                    }
                }
                if !defaults.is_empty() {
                    new_state.default_attachments.insert(key.clone(), defaults);
                }
            }
            let mut labels: BTreeMap<String, String> =
                [(TOOL_LABEL.to_string(), k8s_name(&tool.name))].into();
            for id in applied {
                labels.insert(format!("{POLICY_LABEL_PREFIX}/{id}"), "true".into());
            }
            out.insert(key, labels);
        }
        (out, new_state)
    }
}

fn non_empty(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

fn ip_peer(b: net::IPBlock) -> net::NetworkPolicyPeer {
    net::NetworkPolicyPeer {
        ip_block: Some(b),
        ..Default::default()
    }
}

fn namespace_peer(group: &str, pods: Option<BTreeMap<String, String>>) -> net::NetworkPolicyPeer {
    net::NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some([(NAMESPACE_NAME_LABEL.to_string(), group.to_string())].into()),
            ..Default::default()
        }),
        pod_selector: pods.map(|m| LabelSelector {
            match_labels: Some(m),
            ..Default::default()
        }),
        ip_block: None,
    }
}

/// A CIDR, or a single address as /32 or /128; `true` when it was a single address.
fn parse_net(s: &str) -> Result<(IpNet, bool), String> {
    if s.contains('/') {
        parse_cidr(s)
            .map(|n| (n, false))
            .map_err(|_| format!("{s:?} is not a valid CIDR"))
    } else {
        s.parse::<IpAddr>()
            .map(|ip| (IpNet::from(ip), true))
            .map_err(|_| format!("{s:?} is not a valid IP address or CIDR"))
    }
}
