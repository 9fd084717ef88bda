//! What a rule's peer set is named after: the pods and addresses its peers select, in one
//! canonical spelling, so that every rule whose peers select alike shares one set however
//! they are written — a NetworkPolicy `namespaceSelector` and an admin `namespaces` peer,
//! `matchLabels` and the equal `In` expression, peers in another order or repeated, a
//! peer inside another peer of the same namespaces that selects all their pods — and
//! whether the set is matched as the source or the destination.
//!
//! The name depends on the selectors, never on which pods they select today, so a pod
//! joining or leaving changes the set's elements in place.

use std::collections::{BTreeSet, HashMap};

use ipnet::IpNet;
use palisade_engine::ConcreteRule;
use palisade_model::{
    AdminPeer, AdminPolicy, Cluster, NamespaceMatch, NetworkPolicy, NetworkPolicyPeer, PolicyKind,
    Selector, SelectorOp,
};

/// The policies by name, to find a concrete rule's peers as written.
pub(crate) struct PeerSpecs<'c> {
    network: HashMap<(&'c str, &'c str), &'c NetworkPolicy>,
    admin: HashMap<(PolicyKind, &'c str), &'c AdminPolicy>,
}

impl<'c> PeerSpecs<'c> {
    pub(crate) fn new(cluster: &'c Cluster) -> PeerSpecs<'c> {
        PeerSpecs {
            network: cluster
                .network_policies
                .iter()
                .map(|p| ((p.namespace.as_str(), p.name.as_str()), p))
                .collect(),
            admin: cluster
                .admin_policies
                .iter()
                .map(|p| ((p.kind, p.name.as_str()), p))
                .collect(),
        }
    }

    /// The text a set of `r`'s peers is named after.
    pub(crate) fn of(&self, r: &ConcreteRule) -> String {
        let m = &r.rule;
        let (reference, i) = (&m.policy.reference, m.index as usize);
        let peers = match &reference.namespace {
            Some(ns) => self
                .network
                .get(&(ns.as_str(), reference.name.as_str()))
                .and_then(|p| p.rules(m.direction).get(i))
                .and_then(|rule| rule.peers.as_deref())
                .map(|peers| peers.iter().map(|p| network_peer(ns, p)).collect()),
            None => self
                .admin
                .get(&(reference.kind, reference.name.as_str()))
                .and_then(|p| p.rules(m.direction).get(i))
                .map(|rule| rule.peers.iter().flat_map(admin_peer).collect()),
        };
        match peers {
            Some(peers) => union(peers),
            // A rule not found by name (never: the engine compiled it) is named after itself.
            None => format!("rule {reference:?} {:?} {i}", m.direction),
        }
    }
}

/// One peer as what it selects.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Peer {
    /// The pods a pod selector picks in some namespaces.
    Pods(Scope, String),
    /// A CIDR without its exceptions.
    Block(String),
    /// What the canonical spelling does not cover (peers relative to the subject's
    /// namespace, nodes, unsupported fields), as written.
    Other(String),
}

impl Peer {
    /// The text a set name is a digest of: spelled out here, not left to `Debug`, so that
    /// names stay the same from one build to the next.
    fn spelling(&self) -> String {
        match self {
            Peer::Pods(Scope::Named(ns), pods) => format!("InNamespace({ns:?}, {pods:?})"),
            Peer::Pods(Scope::Selected(ns), pods) => format!("InNamespaces({ns:?}, {pods:?})"),
            Peer::Block(b) => format!("Block({b:?})"),
            Peer::Other(o) => format!("Other({o:?})"),
        }
    }
}

/// Which namespaces a pod peer looks in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Scope {
    /// One namespace, by name (a NetworkPolicy's own).
    Named(String),
    /// Those a namespace selector picks.
    Selected(String),
}

fn network_peer(namespace: &str, peer: &NetworkPolicyPeer) -> Peer {
    match peer {
        NetworkPolicyPeer::Pods {
            namespaces: None,
            pods,
        } => Peer::Pods(Scope::Named(namespace.to_string()), selector(pods)),
        NetworkPolicyPeer::Pods {
            namespaces: Some(ns),
            pods,
        } => Peer::Pods(Scope::Selected(selector(ns)), selector(pods)),
        NetworkPolicyPeer::IpBlock(b) => block(&b.cidr, &b.except),
    }
}

fn admin_peer(peer: &AdminPeer) -> Vec<Peer> {
    match peer {
        AdminPeer::Namespaces(NamespaceMatch::Selector(ns)) => vec![Peer::Pods(
            Scope::Selected(selector(ns)),
            selector(&Selector::everything()),
        )],
        AdminPeer::Pods {
            namespaces: NamespaceMatch::Selector(ns),
            pods,
        } => vec![Peer::Pods(Scope::Selected(selector(ns)), selector(pods))],
        AdminPeer::Networks(nets) => nets.iter().map(|n| block(n, &[])).collect(),
        other => vec![Peer::Other(format!("{other:?}"))],
    }
}

fn block(cidr: &IpNet, except: &[IpNet]) -> Peer {
    let except: BTreeSet<String> = except.iter().map(ToString::to_string).collect();
    Peer::Block(format!("{cidr} except {except:?}"))
}

/// The peers' union, sorted, without repeats and without a pod peer another one of the
/// same namespaces covers by selecting all their pods.
fn union(peers: Vec<Peer>) -> String {
    let everything = selector(&Selector::everything());
    let peers: BTreeSet<Peer> = peers.into_iter().collect();
    let kept: Vec<String> = peers
        .iter()
        .filter(|p| match p {
            Peer::Pods(scope, pods) => {
                pods == &everything
                    || !peers.contains(&Peer::Pods(scope.clone(), everything.clone()))
            }
            _ => true,
        })
        .map(Peer::spelling)
        .collect();
    format!("peers {}", kept.join("; "))
}

/// A selector as its requirements, sorted and without repeats, `matchLabels` entries
/// spelled as the `In` requirements they equal.
fn selector(s: &Selector) -> String {
    let mut reqs: BTreeSet<String> = s
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k} in {v}"))
        .collect();
    for r in &s.expressions {
        let values = |v: &[String]| {
            let v: BTreeSet<&str> = v.iter().map(String::as_str).collect();
            v.into_iter().collect::<Vec<_>>().join(",")
        };
        reqs.insert(match &r.op {
            SelectorOp::In(v) => format!("{} in {}", r.key, values(v)),
            SelectorOp::NotIn(v) => format!("{} notin {}", r.key, values(v)),
            SelectorOp::Exists => format!("{} exists", r.key),
            SelectorOp::DoesNotExist => format!("{} absent", r.key),
        });
    }
    reqs.into_iter().collect::<Vec<_>>().join(" & ")
}

#[cfg(test)]
mod tests {
    use super::{Peer, Scope, selector, union};
    use palisade_model::{Requirement, Selector, SelectorOp};

    fn labels(pairs: &[(&str, &str)]) -> Selector {
        Selector {
            match_labels: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            expressions: vec![],
        }
    }

    fn req(key: &str, op: SelectorOp) -> Requirement {
        Requirement {
            key: key.into(),
            op,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn selectors_that_select_alike_by_their_spelling_are_spelled_alike() {
        let by_labels = labels(&[("app", "web"), ("tier", "db")]);
        let by_expressions = Selector {
            match_labels: Default::default(),
            expressions: vec![
                req("tier", SelectorOp::In(strings(&["db", "db"]))),
                req("app", SelectorOp::In(strings(&["web"]))),
            ],
        };
        assert_eq!(selector(&by_labels), selector(&by_expressions));
        let in_order = Selector {
            match_labels: Default::default(),
            expressions: vec![req("app", SelectorOp::In(strings(&["a", "b"])))],
        };
        let reordered = Selector {
            match_labels: Default::default(),
            expressions: vec![req("app", SelectorOp::In(strings(&["b", "a", "b"])))],
        };
        assert_eq!(selector(&in_order), selector(&reordered));
        // In and NotIn of the same values differ; so do Exists and DoesNotExist
        let not_in = Selector {
            match_labels: Default::default(),
            expressions: vec![req("app", SelectorOp::NotIn(strings(&["a", "b"])))],
        };
        assert_ne!(selector(&in_order), selector(&not_in));
        let exists = Selector {
            match_labels: Default::default(),
            expressions: vec![req("app", SelectorOp::Exists)],
        };
        let absent = Selector {
            match_labels: Default::default(),
            expressions: vec![req("app", SelectorOp::DoesNotExist)],
        };
        assert_ne!(selector(&exists), selector(&absent));
        assert_ne!(selector(&exists), selector(&Selector::everything()));
    }

    #[test]
    fn a_union_is_named_by_what_it_selects() {
        let all = || selector(&Selector::everything());
        let prod = || selector(&labels(&[("env", "prod")]));
        let web = || selector(&labels(&[("app", "web")]));
        // repeated and reordered peers
        assert_eq!(
            union(vec![
                Peer::Pods(Scope::Selected(prod()), all()),
                Peer::Pods(Scope::Named("a".into()), web()),
                Peer::Pods(Scope::Selected(prod()), all()),
            ]),
            union(vec![
                Peer::Pods(Scope::Named("a".into()), web()),
                Peer::Pods(Scope::Selected(prod()), all()),
            ])
        );
        // a peer of some pods of namespaces whose pods another peer selects entirely
        assert_eq!(
            union(vec![
                Peer::Pods(Scope::Selected(prod()), web()),
                Peer::Pods(Scope::Selected(prod()), all()),
            ]),
            union(vec![Peer::Pods(Scope::Selected(prod()), all())])
        );
        assert_eq!(
            union(vec![
                Peer::Pods(Scope::Named("a".into()), all()),
                Peer::Pods(Scope::Named("a".into()), web()),
            ]),
            union(vec![Peer::Pods(Scope::Named("a".into()), all())])
        );
        // but not across namespaces, or between a named namespace and a selector
        assert_ne!(
            union(vec![
                Peer::Pods(Scope::Named("a".into()), all()),
                Peer::Pods(Scope::Named("b".into()), web()),
            ]),
            union(vec![Peer::Pods(Scope::Named("a".into()), all())])
        );
        assert_ne!(
            union(vec![
                Peer::Pods(Scope::Selected(prod()), all()),
                Peer::Pods(Scope::Named("a".into()), web()),
            ]),
            union(vec![Peer::Pods(Scope::Selected(prod()), all())])
        );
    }
}
