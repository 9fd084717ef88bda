//! Deterministic synthetic clusters: namespaces, nodes, pods and a mix of NetworkPolicies
//! (and, on request, AdminNetworkPolicies, a BaselineAdminNetworkPolicy and
//! ClusterNetworkPolicies), written as kubectl-style manifests. The same seed and sizes
//! always give the same bytes.
//!
//! ```
//! let a = palisade_gen::generate(&palisade_gen::Spec { pods: 40, policies: 10, seed: 7, admin: true });
//! let b = palisade_gen::generate(&palisade_gen::Spec { pods: 40, policies: 10, seed: 7, admin: true });
//! assert_eq!(a.cluster_yaml(), b.cluster_yaml());
//! let loaded = palisade_model::load_sources([("c", a.cluster_yaml().as_str()), ("p", a.policies_yaml().as_str())], Default::default()).unwrap();
//! assert_eq!(loaded.cluster.pods.len(), 40);
//! ```

use serde_json::{Value, json};

#[cfg(feature = "proptest")]
pub mod strategies;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Number of pods.
    pub pods: usize,
    /// Number of policies (NetworkPolicies, plus admin policies when `admin`).
    pub policies: usize,
    /// Random seed.
    pub seed: u64,
    /// Include AdminNetworkPolicies, a BaselineAdminNetworkPolicy and ClusterNetworkPolicies
    /// (about one policy in ten).
    pub admin: bool,
}

/// How pods are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodLabels {
    /// The replicas of a deployment share their labels: few pods that policies can tell
    /// apart.
    #[default]
    Deployment,
    /// Every pod also has a label of its own (`instance: i<N>`), and half of the pod
    /// selectors pick pods by it: about as many classes of pods as pods.
    Distinct,
}

/// A generated cluster.
#[derive(Debug, Clone)]
pub struct Generated {
    /// Namespaces, nodes and pods.
    pub cluster: Vec<Value>,
    /// The policies.
    pub policies: Vec<Value>,
}

impl Generated {
    /// The cluster objects as multi-document YAML.
    pub fn cluster_yaml(&self) -> String {
        docs(&self.cluster)
    }
    /// The policies as multi-document YAML.
    pub fn policies_yaml(&self) -> String {
        docs(&self.policies)
    }
    /// The cluster objects and the policies, read as `palisade -f` reads the two files.
    pub fn load(&self) -> Result<palisade_model::Cluster, palisade_model::LoadError> {
        let (c, p) = (self.cluster_yaml(), self.policies_yaml());
        palisade_model::load_sources(
            [("cluster.yaml", c.as_str()), ("policies.yaml", p.as_str())],
            Default::default(),
        )
        .map(|loaded| loaded.cluster)
    }
    /// Namespaces as a `v1 NamespaceList` (the form network-config-analyzer's `--ns_list` reads).
    pub fn namespace_list(&self) -> String {
        list(
            "NamespaceList",
            self.cluster.iter().filter(|o| o["kind"] == "Namespace"),
        )
    }
    /// Pods as a `v1 PodList` (for `--pod_list`).
    pub fn pod_list(&self) -> String {
        list(
            "PodList",
            self.cluster.iter().filter(|o| o["kind"] == "Pod"),
        )
    }
}

fn docs(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| format!("---\n{}", yaml(o)))
        .collect()
}

fn list<'a>(kind: &str, items: impl Iterator<Item = &'a Value>) -> String {
    let items: Vec<&Value> = items.collect();
    yaml(&json!({"apiVersion": "v1", "kind": kind, "items": items}))
}

/// A generated object as YAML.
fn yaml(value: &Value) -> String {
    // A JSON value has string keys and finite numbers only, which YAML always represents:
    // the serializer cannot fail on it.
    #[allow(clippy::expect_used)] // see above: not reachable with a serde_json::Value
    serde_saphyr::to_string(value).expect("a JSON value serializes to YAML")
}

/// SplitMix64: small, fast, and stable across platforms and versions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const APPS: usize = 20;
const TIERS: [&str; 3] = ["web", "api", "db"];
const TEAMS: usize = 5;

/// Generates a cluster whose replicas share their labels.
pub fn generate(spec: &Spec) -> Generated {
    generate_with(spec, PodLabels::Deployment)
}

/// Pods by namespace, for selectors that pick pods by their own labels.
struct Instances(Option<Vec<Vec<usize>>>);

impl Instances {
    /// A selector of one to three pods of namespace `ns` by their `instance` label, half
    /// of the time (when pods have one).
    fn selector(&self, rng: &mut Rng, ns: usize) -> Option<Value> {
        let pods = self.0.as_ref()?.get(ns).filter(|p| !p.is_empty())?;
        if rng.chance(50) {
            return None;
        }
        let one = rng.chance(50);
        let mut pick = || format!("i{}", pods[rng.below(pods.len())]);
        Some(if one {
            json!({"matchLabels": {"instance": pick()}})
        } else {
            json!({"matchExpressions": [{"key": "instance", "operator": "In", "values": [pick(), pick(), pick()]}]})
        })
    }
}

/// Generates a cluster with pods labelled as `labels` says.
pub fn generate_with(spec: &Spec, labels: PodLabels) -> Generated {
    let mut rng = Rng(spec.seed);
    let namespaces = (spec.pods / 50).clamp(1, 200);
    let nodes = (spec.pods / 100).clamp(1, 100);
    let mut cluster = Vec::new();
    for n in 0..nodes {
        cluster.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{n}"), "labels": {"kubernetes.io/hostname": format!("node-{n}"), "zone": format!("z{}", n % 3)}},
            "status": {"addresses": [{"type": "InternalIP", "address": format!("192.168.{}.{}", n / 250, n % 250 + 1)}]}
        }));
    }
    for n in 0..namespaces {
        cluster.push(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("ns-{n}"), "labels": {"team": format!("t{}", n % TEAMS), "env": if n % 3 == 0 { "prod" } else { "dev" }}}
        }));
    }
    // Pods come in deployments of 1-20 replicas that share namespace, labels and ports,
    // as in real clusters.
    let mut i = 0;
    let mut deployment = 0;
    let distinct = labels == PodLabels::Distinct;
    let mut by_namespace = vec![Vec::new(); namespaces];
    while i < spec.pods {
        let replicas = (1 + rng.below(20)).min(spec.pods - i);
        let ns = format!("ns-{}", deployment % namespaces);
        let labels = json!({"app": format!("a{}", rng.below(APPS)), "tier": TIERS[rng.below(3)], "deployment": format!("d{deployment}")});
        let mut ports = vec![
            json!({"name": "http", "containerPort": 80 + (deployment % 2) as i64, "protocol": "TCP"}),
        ];
        if rng.chance(50) {
            ports.push(json!({"name": "dns", "containerPort": 53, "protocol": "UDP"}));
        }
        if rng.chance(30) {
            ports.push(json!({"name": "metrics", "containerPort": 9090, "protocol": "TCP"}));
        }
        for r in 0..replicas {
            let ip = format!("10.{}.{}.{}", 1 + i / 65536, (i / 256) % 256, i % 256);
            let mut labels = labels.clone();
            if distinct {
                labels["instance"] = format!("i{i}").into();
                by_namespace[deployment % namespaces].push(i);
            }
            cluster.push(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("d{deployment}-{r}"), "namespace": ns, "labels": labels},
                "spec": {"nodeName": format!("node-{}", i % nodes), "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9", "ports": ports}]},
                "status": {"podIP": ip, "podIPs": [{"ip": ip}]}
            }));
            i += 1;
        }
        deployment += 1;
    }
    let instances = Instances(distinct.then_some(by_namespace));
    let mut policies = Vec::new();
    let admin_count = if spec.admin { spec.policies / 10 } else { 0 };
    for p in 0..spec.policies - admin_count {
        policies.push(network_policy(&mut rng, p, namespaces, &instances));
    }
    for p in 0..admin_count {
        policies.push(admin_policy(&mut rng, p));
    }
    Generated { cluster, policies }
}

/// A pod selector for pods of namespace `ns`.
fn pod_selector_in(rng: &mut Rng, instances: &Instances, ns: usize) -> Value {
    instances
        .selector(rng, ns)
        .unwrap_or_else(|| pod_selector(rng))
}

fn pod_selector(rng: &mut Rng) -> Value {
    match rng.below(4) {
        0 => json!({}),
        1 => json!({"matchLabels": {"app": format!("a{}", rng.below(APPS))}}),
        2 => json!({"matchLabels": {"tier": TIERS[rng.below(3)]}}),
        _ => {
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": [format!("a{}", rng.below(APPS)), format!("a{}", rng.below(APPS))]}]})
        }
    }
}

fn ports(rng: &mut Rng) -> Value {
    match rng.below(5) {
        0 => json!([{"port": 80, "protocol": "TCP"}]),
        1 => json!([{"port": "http"}]),
        2 => json!([{"port": 8000, "endPort": 8080}, {"port": 53, "protocol": "UDP"}]),
        3 => json!([{"protocol": "UDP"}]),
        _ => Value::Null,
    }
}

fn np_peer(rng: &mut Rng, instances: &Instances, ns: usize) -> Value {
    match rng.below(4) {
        0 => json!({"podSelector": pod_selector_in(rng, instances, ns)}),
        1 => {
            json!({"namespaceSelector": {"matchLabels": {"team": format!("t{}", rng.below(TEAMS))}}})
        }
        2 => {
            // Namespaces with env=prod are those whose number is a multiple of 3.
            let prod = instances
                .0
                .as_ref()
                .map_or(0, |by_ns| 3 * rng.below(by_ns.len().div_ceil(3)));
            json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}, "podSelector": pod_selector_in(rng, instances, prod)})
        }
        _ => {
            json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": [format!("10.1.{}.0/24", rng.below(40))]}})
        }
    }
}

fn np_rule(rng: &mut Rng, peers_key: &str, instances: &Instances, ns: usize) -> Value {
    let mut rule = serde_json::Map::new();
    if rng.chance(85) {
        rule.insert(
            peers_key.into(),
            Value::Array(
                (0..1 + rng.below(2))
                    .map(|_| np_peer(rng, instances, ns))
                    .collect(),
            ),
        );
    }
    let p = ports(rng);
    if !p.is_null() {
        rule.insert("ports".into(), p);
    }
    Value::Object(rule)
}

fn network_policy(rng: &mut Rng, p: usize, namespaces: usize, instances: &Instances) -> Value {
    // With per-pod labels the namespace is drawn first: selectors pick its pods.
    let early_ns = instances.0.is_some().then(|| rng.below(namespaces));
    let ns = early_ns.unwrap_or(0);
    let types = match rng.below(3) {
        0 => vec!["Ingress"],
        1 => vec!["Egress"],
        _ => vec!["Ingress", "Egress"],
    };
    // Rules only for the listed directions (some analyzers reject the others).
    let mut spec = serde_json::Map::new();
    spec.insert("podSelector".into(), pod_selector_in(rng, instances, ns));
    if types.contains(&"Ingress") {
        spec.insert(
            "ingress".into(),
            (0..rng.below(3))
                .map(|_| np_rule(rng, "from", instances, ns))
                .collect(),
        );
    }
    if types.contains(&"Egress") {
        spec.insert(
            "egress".into(),
            (0..rng.below(3))
                .map(|_| np_rule(rng, "to", instances, ns))
                .collect(),
        );
    }
    spec.insert("policyTypes".into(), json!(types));
    let ns = early_ns.unwrap_or_else(|| rng.below(namespaces));
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": format!("np-{p}"), "namespace": format!("ns-{ns}")},
        "spec": spec
    })
}

fn admin_policy(rng: &mut Rng, p: usize) -> Value {
    let subject = if rng.chance(50) {
        json!({"namespaces": {"matchLabels": {"team": format!("t{}", rng.below(TEAMS))}}})
    } else {
        json!({"pods": {"namespaceSelector": {"matchLabels": {"env": "prod"}}, "podSelector": {"matchLabels": {"tier": TIERS[rng.below(3)]}}}})
    };
    let peer = |rng: &mut Rng| match rng.below(3) {
        0 => json!({"namespaces": {"matchLabels": {"team": format!("t{}", rng.below(TEAMS))}}}),
        1 => {
            json!({"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": format!("a{}", rng.below(APPS))}}}})
        }
        _ => json!({"namespaces": {}}),
    };
    match p % 3 {
        0 if p == 0 => json!({
            "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "BaselineAdminNetworkPolicy",
            "metadata": {"name": "default"},
            "spec": {"subject": subject, "ingress": [{"name": "baseline-deny", "action": "Deny", "from": [peer(rng)]}]}
        }),
        0 | 1 => {
            let actions = ["Allow", "Deny", "Pass"];
            json!({
                "apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
                "metadata": {"name": format!("anp-{p}")},
                "spec": {"priority": rng.below(100), "subject": subject,
                    "ingress": [{"name": "r0", "action": actions[rng.below(3)], "from": [peer(rng)], "ports": [{"portNumber": {"protocol": "TCP", "port": 80}}]}],
                    "egress": [{"name": "r1", "action": actions[rng.below(3)], "to": [peer(rng)]}]}
            })
        }
        _ => {
            let actions = ["Accept", "Deny", "Pass"];
            json!({
                "apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
                "metadata": {"name": format!("cnp-{p}")},
                "spec": {"tier": if rng.chance(50) { "Admin" } else { "Baseline" }, "priority": rng.below(100), "subject": subject,
                    "ingress": [{"name": "r0", "action": actions[rng.below(3)], "from": [peer(rng)], "protocols": [{"tcp": {"destinationPort": {"range": {"start": 80, "end": 81}}}}]}]}
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(seed: u64, admin: bool) -> Spec {
        Spec {
            pods: 300,
            policies: 60,
            seed,
            admin,
        }
    }

    #[test]
    fn same_seed_same_output() {
        for admin in [false, true] {
            let a = generate(&spec(7, admin));
            let b = generate(&spec(7, admin));
            assert_eq!(a.cluster_yaml(), b.cluster_yaml());
            assert_eq!(a.policies_yaml(), b.policies_yaml());
            assert_eq!(a.pod_list(), b.pod_list());
            assert_eq!(a.namespace_list(), b.namespace_list());
        }
    }

    #[test]
    fn distinct_labels_make_about_one_class_per_pod() {
        let g = generate_with(&spec(4, false), PodLabels::Distinct);
        let pods: Vec<&Value> = g.cluster.iter().filter(|o| o["kind"] == "Pod").collect();
        let mut instances: Vec<&str> = pods
            .iter()
            .filter_map(|p| p["metadata"]["labels"]["instance"].as_str())
            .collect();
        instances.sort_unstable();
        instances.dedup();
        assert_eq!(instances.len(), 300, "one instance label per pod");
        let by_instance = g
            .policies
            .iter()
            .filter(|p| p["spec"]["podSelector"].to_string().contains("instance"))
            .count();
        assert!(
            by_instance > 10,
            "{by_instance} of 60 policies select by instance"
        );
        let plain = generate(&spec(4, false));
        assert_eq!(
            plain.cluster_yaml(),
            generate_with(&spec(4, false), PodLabels::Deployment).cluster_yaml()
        );
    }

    #[test]
    fn different_seed_different_output() {
        let a = generate(&spec(1, false));
        let b = generate(&spec(2, false));
        assert_ne!(a.policies_yaml(), b.policies_yaml());
    }

    #[test]
    fn sizes_as_requested() {
        let g = generate(&spec(3, false));
        let pods = g.cluster.iter().filter(|o| o["kind"] == "Pod").count();
        assert_eq!(pods, 300);
        assert_eq!(g.policies.len(), 60);
        assert!(g.policies.iter().all(|p| p["kind"] == "NetworkPolicy"));
    }

    #[test]
    fn yaml_reads_back_as_the_generated_objects() {
        let g = generate(&spec(5, true));
        for (objects, text) in [
            (&g.cluster, g.cluster_yaml()),
            (&g.policies, g.policies_yaml()),
        ] {
            let docs = palisade_model::yaml::parse_documents(&text).expect("the output parses");
            let back: Vec<&Value> = docs.iter().map(|d| &d.value).collect();
            assert_eq!(back, objects.iter().collect::<Vec<_>>());
        }
    }
}
