//! Compilation of a valid [`Config`] into NetworkPolicies and tool labels.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::networking::v1 as net;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use palisade_model::validate::{dns_label, label_value, qualified_name};
use palisade_model::{Diagnostic, NAMESPACE_NAME_LABEL, Protocol, Severity};

use crate::config::{
    BasePolicy, Config, CustomRule, IpBlock, Label, Located, Policy, PortRule, Rule, label_map,
};
use crate::error::Error;
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
/// Default namespace of the platform API, for the default base policy.
pub const DEFAULT_PLATFORM_NAMESPACE: &str = "platform";
/// Default labels of the platform API pods, for the default base policy.
pub const DEFAULT_PLATFORM_LABELS: &[(&str, &str)] = &[("app", "api")];
/// Name of the default base policy (in the `tenancy.palisade.io/policies` annotation).
pub const DEFAULT_BASE_NAME: &str = "platform-default";

/// Compile options: where the platform API runs, for the default base policy. Built by
/// [`Options::new`], which validates them, so they always make valid NetworkPolicies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    platform_namespace: String,
    platform_labels: BTreeMap<String, String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            platform_namespace: DEFAULT_PLATFORM_NAMESPACE.into(),
            platform_labels: DEFAULT_PLATFORM_LABELS
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        }
    }
}

impl Options {
    /// Options for a platform API in `namespace` whose pods carry `labels`: the namespace
    /// must be a DNS-1123 label, each key a qualified name and each value a label value.
    pub fn new(
        namespace: &str,
        labels: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Options, Error> {
        let option = |message: String| Error::Option {
            option: "platform",
            message,
        };
        if let Some(e) = dns_label(namespace) {
            return Err(option(format!("namespace {e}")));
        }
        let mut platform_labels = BTreeMap::new();
        for (key, value) in labels {
            if let Some(e) = qualified_name(&key).or_else(|| label_value(&value)) {
                return Err(option(format!("label {key}={value}: {e}")));
            }
            platform_labels.insert(key, value);
        }
        Ok(Options {
            platform_namespace: namespace.to_string(),
            platform_labels,
        })
    }

    /// Namespace of the platform API.
    pub fn platform_namespace(&self) -> &str {
        &self.platform_namespace
    }

    /// Labels of the platform API pods.
    pub fn platform_labels(&self) -> &BTreeMap<String, String> {
        &self.platform_labels
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
    // A map built in this order, as `json!({"ingress": .., "egress": ..})` builds it, so
    // that ids stay what they were when rules were kept as written.
    let mut map = serde_json::Map::new();
    for (key, rules) in [("ingress", ingress), ("egress", egress)] {
        // Rules hold only strings, numbers, booleans, options and lists, which JSON always
        // represents. Were that ever to change, stop rather than give two policies one id.
        #[allow(clippy::expect_used)] // unreachable, see above; a fallback id would be unsafe
        let value = serde_json::to_value(rules).expect("tenancy rules serialize to JSON");
        map.insert(key.to_string(), value);
    }
    let text = serde_json::Value::Object(map).to_string();
    format!(
        "{:012x}",
        palisade_model::digest::fnv64(&text) & 0xffff_ffff_ffff
    )
}

/// Compiles a valid configuration (as [`Config::parse`] returns it).
pub fn compile(config: &Config, options: &Options, state: &State) -> Output {
    let mut c = Compiler {
        config,
        notices: Vec::new(),
        tools_by_name: HashMap::new(),
        nps: BTreeMap::new(),
    };
    for t in &config.tools {
        c.tools_by_name
            .entry(t.value.name.as_str())
            .or_default()
            .push(t.value.group.as_str());
    }
    let default = default_base(options);
    let bases: Vec<&BasePolicy> = if config.base_network_policies.is_empty() {
        vec![&default]
    } else {
        config
            .base_network_policies
            .iter()
            .map(|b| &b.value)
            .collect()
    };
    let every_tool = LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: TOOL_LABEL.into(),
            operator: "Exists".into(),
            values: None,
        }]),
        ..Default::default()
    };
    for base in bases {
        let id = format!("base-{}", content_id(&base.ingress, &base.egress));
        for group in &config.groups {
            c.add_np(
                &group.value,
                &id,
                &base.name,
                every_tool.clone(),
                &base.ingress,
                &base.egress,
            );
        }
    }
    for p in &config.network_policies {
        let id = content_id(&p.value.ingress, &p.value.egress);
        let selector = LabelSelector {
            match_labels: Some(
                [(format!("{POLICY_LABEL_PREFIX}/{id}"), "true".to_string())].into(),
            ),
            ..Default::default()
        };
        for group in &p.value.groups {
            c.add_np(
                group,
                &id,
                &p.value.name,
                selector.clone(),
                &p.value.ingress,
                &p.value.egress,
            );
        }
    }
    let (tool_labels, state) = c.tool_labels(state);
    let network_policies = c
        .nps
        .into_values()
        .map(|(mut np, names)| {
            let names: Vec<String> = names.into_iter().collect();
            np.metadata.annotations =
                Some([(POLICY_ANNOTATION.to_string(), names.join(","))].into());
            np
        })
        .collect();
    Output {
        network_policies,
        tool_labels,
        state,
        notices: c.notices,
    }
}

/// The default base policy of the Thorium documentation's network-policy model, with the
/// platform's namespace and labels: ingress only from the platform API; egress only to
/// it and to cluster DNS.
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
    let link_local = |s: &str| s.parse().map(IpBlock::net);
    BasePolicy {
        name: DEFAULT_BASE_NAME.into(),
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
                allowed_ips: ["169.254.0.0/16", "fe80::/10"]
                    .into_iter()
                    .filter_map(|s| link_local(s).ok())
                    .collect(),
                allowed_custom: vec![dns("kube-dns"), dns("node-local-dns")],
                ports: Some(vec![PortRule {
                    ports: palisade_model::PortRange::single(dns_port()),
                    protocol: Some(Protocol::Udp),
                }]),
                ..Rule::default()
            },
        ]),
    }
}

/// Port 53, where cluster DNS answers.
fn dns_port() -> palisade_model::Port {
    match palisade_model::Port::new(53) {
        Some(p) => p,
        None => unreachable!("53 is within 1-65535"),
    }
}

/// NetworkPolicies by (namespace, name), with the tenancy policies each implements.
type NetworkPolicies = BTreeMap<(String, String), (net::NetworkPolicy, BTreeSet<String>)>;

struct Compiler<'c> {
    config: &'c Config,
    notices: Vec<Diagnostic>,
    /// tool name → groups it exists in
    tools_by_name: HashMap<&'c str, Vec<&'c str>>,
    nps: NetworkPolicies,
}

impl Compiler<'_> {
    /// The peers (`None` = every peer) and ports (`None` = every port) of one rule.
    #[allow(clippy::type_complexity)] // the two halves of a NetworkPolicy rule
    fn rule(
        &self,
        r: &Rule,
    ) -> (
        Option<Vec<net::NetworkPolicyPeer>>,
        Option<Vec<net::NetworkPolicyPort>>,
    ) {
        let mut peers: Vec<net::NetworkPolicyPeer> =
            r.allowed_ips.iter().map(|b| ip_peer(ip_block(b))).collect();
        for g in &r.allowed_groups {
            peers.push(namespace_peer(g, None));
        }
        for t in &r.allowed_tools {
            for g in self.tools_by_name.get(t.as_str()).into_iter().flatten() {
                peers.push(namespace_peer(
                    g,
                    Some([(TOOL_LABEL.to_string(), k8s_name(t))].into()),
                ));
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
        peers.extend(r.allowed_custom.iter().map(custom_peer));
        let ports = r
            .ports
            .as_ref()
            .map(|ports| ports.iter().flat_map(np_ports).collect());
        let peers = if r.allowed_all { None } else { Some(peers) };
        (peers, ports)
    }

    fn add_np(
        &mut self,
        group: &str,
        id: &str,
        policy_name: &str,
        pod_selector: LabelSelector,
        ingress: &Option<Vec<Rule>>,
        egress: &Option<Vec<Rule>>,
    ) {
        if ingress.is_none() && egress.is_none() {
            return; // restricts nothing in either direction
        }
        let key = (group.to_string(), format!("tenancy-{id}"));
        if let Some((_, names)) = self.nps.get_mut(&key) {
            names.insert(policy_name.to_string());
            return;
        }
        let convert = |rules: &Option<Vec<Rule>>| {
            rules.as_ref().map(|rules| {
                rules
                    .iter()
                    .map(|r| self.rule(r))
                    // A rule that names no peer allows nothing: leave it out (the
                    // direction stays isolated by the others).
                    .filter(|(peers, _)| !peers.as_ref().is_some_and(Vec::is_empty))
                    .collect::<Vec<_>>()
            })
        };
        let ing = convert(ingress);
        let eg = convert(egress);
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
        self.nps.insert(key, (np, [policy_name.to_string()].into()));
    }

    /// Each tool's labels: its name, and one label per policy that applies (explicit,
    /// forced, and default ones — remembered in the state once attached).
    fn tool_labels(
        &mut self,
        state: &State,
    ) -> (BTreeMap<String, BTreeMap<String, String>>, State) {
        let policies = &self.config.network_policies;
        let mut out = BTreeMap::new();
        let mut new_state = State::default();
        let in_group = |g: &str, name: &str| -> Option<&Located<Policy>> {
            policies
                .iter()
                .find(|p| p.value.name == name && p.value.groups.iter().any(|x| x == g))
        };
        let id = |p: &Located<Policy>| content_id(&p.value.ingress, &p.value.egress);
        for t in &self.config.tools {
            let tool = &t.value;
            let key = format!("{}/{}", tool.group, tool.name);
            let mut applied: BTreeSet<String> = tool
                .network_policies
                .iter()
                .filter_map(|name| in_group(&tool.group, name))
                .map(id)
                .collect();
            applied.extend(
                policies
                    .iter()
                    .filter(|p| p.value.forced_policy && p.value.groups.contains(&tool.group))
                    .map(id),
            );
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
                            applied.insert(id(p));
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

fn ip_block(b: &IpBlock) -> net::IPBlock {
    net::IPBlock {
        cidr: b.cidr.to_string(),
        except: (!b.except.is_empty()).then(|| b.except.iter().map(|e| e.to_string()).collect()),
    }
}

/// "If both namespace *and* pod labels are specified, only pods with all of the given pod
/// labels that are in a namespace with all of the given namespace labels will match."
/// Pod labels alone match those pods in every namespace.
fn custom_peer(c: &CustomRule) -> net::NetworkPolicyPeer {
    net::NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: non_empty(label_map(&c.namespace_labels)),
            ..Default::default()
        }),
        pod_selector: non_empty(label_map(&c.pod_labels)).map(|m| LabelSelector {
            match_labels: Some(m),
            ..Default::default()
        }),
        ip_block: None,
    }
}

/// A port without protocol means all protocols: one entry each for TCP, UDP and SCTP.
fn np_ports(p: &PortRule) -> Vec<net::NetworkPolicyPort> {
    let protocols = match p.protocol {
        Some(proto) => vec![proto],
        None => Protocol::ALL.to_vec(),
    };
    protocols
        .into_iter()
        .map(|proto| net::NetworkPolicyPort {
            protocol: Some(proto.as_str().into()),
            port: Some(IntOrString::Int(i32::from(p.ports.start.get()))),
            end_port: (p.ports.end != p.ports.start).then(|| i32::from(p.ports.end.get())),
        })
        .collect()
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
