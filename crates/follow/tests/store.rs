//! The store turns source events into engine changes: an engine that follows them decides
//! every connection as an engine built from scratch on the same manifests, and invalid
//! input never widens what is allowed.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

use std::net::IpAddr;

use palisade_engine::{Engine, Flow, Options};
use palisade_follow::source::{Event, Text};
use palisade_follow::store::{Scope, Store};
use palisade_model::Protocol;

const CLUSTER: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");
const ANP: &str = include_str!("../../../examples/xyz/policies/02-anp.yaml");
const BANP: &str = include_str!("../../../examples/xyz/policies/03-banp.yaml");

fn text(id: &str, body: &str) -> Text {
    Text {
        id: id.into(),
        body: body.into(),
    }
}

/// A store and the engine that follows its changes.
struct Follower {
    store: Store,
    engine: Option<Engine>,
    staged_changes: usize,
}

impl Follower {
    fn new() -> Self {
        Follower {
            store: Store::default(),
            engine: None,
            staged_changes: 0,
        }
    }

    fn send(&mut self, event: Event) {
        let changes = self.store.handle(event);
        let engine = self
            .engine
            .get_or_insert_with(|| Engine::new(Default::default(), Options::default()));
        for (change, scope) in changes {
            match scope {
                Scope::Enforced => {
                    engine.apply(change.cloned());
                }
                Scope::Staged => self.staged_changes += 1,
            }
        }
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().unwrap()
    }
}

/// Every pod address, the node address and an external one.
fn addresses(e: &Engine) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = e
        .cluster()
        .pods
        .iter()
        .flat_map(|p| p.ips.clone())
        .collect();
    ips.extend(e.cluster().nodes.iter().flat_map(|n| n.addresses.clone()));
    ips.push("203.0.113.9".parse().unwrap());
    ips.sort();
    ips.dedup();
    ips
}

/// (src, dst, protocol, port) → (allowed, egress tier, ingress tier) over every pair.
fn verdicts(e: &Engine, ips: &[IpAddr]) -> Vec<String> {
    let mut out = Vec::new();
    for src in ips {
        for dst in ips {
            for (protocol, port) in [
                (Protocol::Tcp, 80),
                (Protocol::Tcp, 81),
                (Protocol::Udp, 53),
            ] {
                let v = e.evaluate(&Flow {
                    src: e.endpoint_for_ip(*src),
                    dst: e.endpoint_for_ip(*dst),
                    protocol,
                    port,
                });
                out.push(format!(
                    "{src}->{dst} {protocol:?}/{port}: {} {:?} {:?}",
                    v.allowed, v.egress.tier, v.ingress.tier
                ));
            }
        }
    }
    out
}

/// An engine built from scratch on these texts.
fn fresh(texts: &[(&str, &str)]) -> Engine {
    let loaded = palisade_model::load_sources(texts.iter().copied(), Default::default()).unwrap();
    Engine::new(loaded.cluster, Options::default())
}

fn assert_same(follower: &Follower, texts: &[(&str, &str)]) {
    let expected = fresh(texts);
    let ips = addresses(&expected);
    assert_eq!(addresses(follower.engine()), ips);
    assert_eq!(verdicts(follower.engine(), &ips), verdicts(&expected, &ips));
}

#[test]
fn following_edits_equals_loading_from_scratch() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![text("c.yaml", CLUSTER)]));
    f.send(Event::Synced);
    assert_same(&f, &[("c.yaml", CLUSTER)]);
    f.send(Event::Put(vec![
        text("p1.yaml", DENY_X),
        text("p2.yaml", ANP),
    ]));
    assert_same(
        &f,
        &[("c.yaml", CLUSTER), ("p1.yaml", DENY_X), ("p2.yaml", ANP)],
    );
    // A relabel: pod x/b becomes pod=c.
    let relabelled = CLUSTER.replacen("pod: b", "pod: c", 1);
    f.send(Event::Put(vec![text("c.yaml", &relabelled)]));
    assert_same(
        &f,
        &[
            ("c.yaml", &relabelled),
            ("p1.yaml", DENY_X),
            ("p2.yaml", ANP),
        ],
    );
    f.send(Event::Remove(vec!["p2.yaml".into()]));
    f.send(Event::Put(vec![text("p3.yaml", BANP)]));
    assert_same(
        &f,
        &[
            ("c.yaml", &relabelled),
            ("p1.yaml", DENY_X),
            ("p3.yaml", BANP),
        ],
    );
    // A relist that no longer has p1.
    f.send(Event::Replace {
        prefix: String::new(),
        texts: vec![text("c.yaml", CLUSTER), text("p3.yaml", BANP)],
    });
    assert_same(&f, &[("c.yaml", CLUSTER), ("p3.yaml", BANP)]);
}

#[test]
fn a_namespace_removed_while_its_pods_remain_is_implied_not_emptied() {
    let mut f = Follower::new();
    let (nodes_and_namespaces, pods) = CLUSTER.split_at(CLUSTER.find("kind: Pod").unwrap());
    // Split at the document boundary before the first pod.
    let cut = nodes_and_namespaces.rfind("---").unwrap();
    let (head, pods) = (
        &CLUSTER[..cut],
        format!("{}{pods}", &nodes_and_namespaces[cut..]),
    );
    f.send(Event::Put(vec![
        text("ns.yaml", head),
        text("pods.yaml", &pods),
    ]));
    f.send(Event::Put(vec![text("p1.yaml", DENY_X)]));
    f.send(Event::Synced);
    let pods_before = f.engine().cluster().pods.len();
    f.send(Event::Remove(vec!["ns.yaml".into()]));
    assert_eq!(f.engine().cluster().pods.len(), pods_before);
    // Without the declared namespaces their labels are gone: same as loading the pods alone.
    assert_same(&f, &[("pods.yaml", &pods), ("p1.yaml", DENY_X)]);
}

#[test]
fn a_policy_that_turns_invalid_keeps_its_last_valid_version() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![
        text("c.yaml", CLUSTER),
        text("p1.yaml", DENY_X),
    ]));
    let broken = DENY_X.replace("port: serve-80-tcp", "port: 70000");
    f.send(Event::Put(vec![text("p1.yaml", &broken)]));
    assert_same(&f, &[("c.yaml", CLUSTER), ("p1.yaml", DENY_X)]);
    assert_eq!(f.store.problems().len(), 1);
    let d = &f.store.problems()["p1.yaml"][0];
    assert_eq!(&*d.file, "p1.yaml");
    assert!(d.field.contains("ports[0].port"), "{d}");
    // Fixed: the problem is gone and the fix is in force.
    let fixed = DENY_X.replace("port: serve-80-tcp", "port: 81");
    f.send(Event::Put(vec![text("p1.yaml", &fixed)]));
    assert_same(&f, &[("c.yaml", CLUSTER), ("p1.yaml", &fixed)]);
    assert!(f.store.problems().is_empty());
}

#[test]
fn a_file_that_no_longer_parses_keeps_everything_it_held() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![
        text("c.yaml", CLUSTER),
        text("p.yaml", &format!("{DENY_X}\n---\n{ANP}")),
    ]));
    f.send(Event::Put(vec![text("p.yaml", "kind: [unclosed\n")]));
    assert_same(
        &f,
        &[
            ("c.yaml", CLUSTER),
            ("p.yaml", &format!("{DENY_X}\n---\n{ANP}")),
        ],
    );
    assert!(f.store.problems().contains_key("p.yaml"));
}

/// A typo in a policy's kind, or a name turned invalid, is not a removal: the text's
/// previous objects stay in force, and the error is listed.
#[test]
fn a_text_with_a_typo_keeps_what_it_held() {
    let both = format!("{DENY_X}\n---\n{ANP}");
    for (what, broken) in [
        (
            "kind",
            both.replacen("kind: NetworkPolicy", "kind: NetworkPolicies", 1),
        ),
        (
            "admin kind",
            both.replacen("kind: AdminNetworkPolicy", "kind: AdminNetworkPolicies", 1),
        ),
        (
            "name",
            both.replacen("name: allow-from-y-b", "name: Allow_From_Y", 1),
        ),
    ] {
        assert_ne!(broken, both, "{what}: the fixture changed");
        let mut f = Follower::new();
        f.send(Event::Put(vec![
            text("c.yaml", CLUSTER),
            text("p.yaml", &both),
        ]));
        f.send(Event::Put(vec![text("p.yaml", &broken)]));
        assert_same(&f, &[("c.yaml", CLUSTER), ("p.yaml", &both)]);
        assert!(
            f.store.problems().contains_key("p.yaml"),
            "{what}: not reported"
        );
        // An explicit, well-formed removal removes.
        f.send(Event::Put(vec![text("p.yaml", ANP)]));
        assert_same(&f, &[("c.yaml", CLUSTER), ("p.yaml", ANP)]);
        assert!(f.store.problems().is_empty());
    }
}

/// A text that cannot be read (emptied, unreadable) keeps its objects until it is removed.
#[test]
fn an_unreadable_text_keeps_its_objects_until_removed() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![
        text("c.yaml", CLUSTER),
        text("p.yaml", DENY_X),
    ]));
    f.send(Event::Unreadable {
        id: "p.yaml".into(),
        reason: "empty".into(),
    });
    assert_same(&f, &[("c.yaml", CLUSTER), ("p.yaml", DENY_X)]);
    assert!(f.store.problems()["p.yaml"][0].message.contains("empty"));
    f.send(Event::Remove(vec!["p.yaml".into()]));
    assert_same(&f, &[("c.yaml", CLUSTER)]);
    assert!(f.store.problems().is_empty());
}

#[test]
fn a_new_invalid_policy_isolates_its_subject() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![text("c.yaml", CLUSTER)]));
    let broken = DENY_X.replace("port: serve-80-tcp", "port: 70000");
    f.send(Event::Put(vec![text("p1.yaml", &broken)]));
    // Standing in: x is isolated for ingress with no rule (deny everything in).
    let isolation = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: allow-from-y-b, namespace: x}\nspec: {podSelector: {}, policyTypes: [Ingress]}\n";
    assert_same(&f, &[("c.yaml", CLUSTER), ("p1.yaml", isolation)]);
    assert_eq!(f.store.stand_ins(), 1);
    // An invalid admin policy denies its subject's named directions at its priority.
    let anp = ANP.replace("action: ", "action: Maybe");
    f.send(Event::Put(vec![text("p2.yaml", &anp)]));
    assert_eq!(f.store.stand_ins(), 2);
    let engine = f.engine();
    let ips = addresses(engine);
    let before = verdicts(&fresh(&[("c.yaml", CLUSTER), ("p1.yaml", isolation)]), &ips);
    let after = verdicts(engine, &ips);
    let allowed = |v: &[String]| v.iter().filter(|l| l.contains(": true ")).count();
    assert!(
        allowed(&after) < allowed(&before),
        "the stand-in must deny more"
    );
    // Nothing the valid state denies is allowed now.
    for (b, a) in before.iter().zip(&after) {
        assert!(
            !(b.contains(": false ") && a.contains(": true ")),
            "{b} became {a}"
        );
    }
}

#[test]
fn a_policy_moved_between_files_is_never_absent() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![
        text("c.yaml", CLUSTER),
        text("a.yaml", DENY_X),
    ]));
    // The new file appears first (a separate batch), then the old one goes.
    f.send(Event::Put(vec![text("b.yaml", DENY_X)]));
    assert_same(&f, &[("c.yaml", CLUSTER), ("a.yaml", DENY_X)]);
    f.send(Event::Remove(vec!["a.yaml".into()]));
    assert_same(&f, &[("c.yaml", CLUSTER), ("b.yaml", DENY_X)]);
}

#[test]
fn staged_policies_change_only_the_staged_view() {
    let mut f = Follower::new();
    f.send(Event::Put(vec![text("c.yaml", CLUSTER)]));
    let staged = DENY_X.replace(
        "namespace: x\n",
        "namespace: x\n  annotations: {palisade.dev/staged: \"true\"}\n",
    );
    f.send(Event::Put(vec![text("p1.yaml", &staged)]));
    assert!(f.store.has_staged());
    assert_eq!(f.staged_changes, 1);
    assert_same(&f, &[("c.yaml", CLUSTER)]);
    assert_eq!(f.store.cluster().with_staged().network_policies.len(), 1);
}

/// A Job's pod completes (its IP stays in the API) and a new pod gets the address: the
/// address is the new pod's, with the new pod's access only.
#[test]
fn a_completed_pod_gives_its_address_up() {
    let pod = |name: &str, label: &str, phase: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: \"y\", labels: {{pod: {label}}}}}\nspec: {{nodeName: node-1}}\nstatus: {{phase: {phase}, podIP: 10.0.1.99}}\n"
        )
    };
    let mut f = Follower::new();
    f.send(Event::Put(vec![
        text("c.yaml", CLUSTER),
        text("p1.yaml", DENY_X),
        text("job.yaml", &pod("job", "b", "Running")),
    ]));
    f.send(Event::Put(vec![
        text("job.yaml", &pod("job", "b", "Succeeded")),
        text("new.yaml", &pod("new", "a", "Running")),
    ]));
    let ip: IpAddr = "10.0.1.99".parse().unwrap();
    let e = f.engine();
    let owner = e.endpoint_for_ip(ip);
    assert!(
        matches!(owner.kind, palisade_engine::EndpointKind::Pod(p) if e.cluster().pods[p].name == "new"),
        "{owner:?}"
    );
    assert_same(
        &f,
        &[
            ("c.yaml", CLUSTER),
            ("p1.yaml", DENY_X),
            ("job.yaml", &pod("job", "b", "Succeeded")),
            ("new.yaml", &pod("new", "a", "Running")),
        ],
    );
}

/// Logs and diagnostics name objects plainly, never in Rust's debug form.
#[test]
fn keys_read_as_kind_namespace_and_name() {
    use palisade_follow::store::ObjectKey;
    use palisade_model::Kind;
    assert_eq!(
        ObjectKey::new(Kind::Pod, Some("x"), "a").to_string(),
        "Pod x/a"
    );
    assert_eq!(
        ObjectKey::new(Kind::NetworkPolicy, Some("x"), "web")
            .as_staged()
            .to_string(),
        "NetworkPolicy x/web (staged)"
    );
    assert_eq!(
        ObjectKey::new(Kind::ClusterNetworkPolicy, None, "deny").to_string(),
        "ClusterNetworkPolicy deny"
    );
    assert_eq!(
        ObjectKey::new(Kind::Namespace, Some("ignored"), "x").to_string(),
        "Namespace x"
    );
}
