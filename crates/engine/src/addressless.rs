//! Endpoints without an address — the representative pods of workloads (Deployments and
//! the like) read before anything is deployed — are evaluated by selector logic at the
//! unspecified address. A verdict on such an endpoint may still depend on the address it
//! will get: this module says when.

use palisade_model::{AdminPeer, Direction, NetworkPolicyPeer};

use crate::eval::{Endpoint, EndpointKind, Flow};
use crate::state::Engine;

/// Whether an endpoint stands for pods whose address is not known.
pub fn addressless(e: &Endpoint) -> bool {
    addressless_ip(&e.ip)
}

/// Whether an address is the placeholder of an endpoint without one.
pub fn addressless_ip(ip: &std::net::IpAddr) -> bool {
    ip.is_unspecified()
}

/// Whether `net` with `except` holds every address (then it cannot tell addresses apart).
fn everything(net: &ipnet::IpNet, except: &[ipnet::IpNet]) -> bool {
    net.prefix_len() == 0 && except.is_empty()
}

impl Engine {
    /// Whether the verdict on `flow` could change with the address an address-less
    /// endpoint will get: a policy of the other side names CIDRs (or, for a host endpoint,
    /// nodes, or the node-local exemption could apply).
    pub fn depends_on_address(&self, flow: &Flow) -> bool {
        let side = |subject: &Endpoint, peer: &Endpoint, dir: Direction| {
            if !addressless(peer) {
                return false;
            }
            let EndpointKind::Pod(pod) = subject.kind else {
                return false;
            };
            if matches!(peer.kind, EndpointKind::Host(None))
                && dir == Direction::Ingress
                && self.options.allow_node_local
            {
                return true;
            }
            let lists = self.policies(pod, dir);
            let nps = lists.network.iter().any(|&i| {
                self.cluster.network_policies[i as usize]
                    .rules(dir)
                    .iter()
                    .flat_map(|r| r.peers.iter().flatten())
                    .any(|p| matches!(p, NetworkPolicyPeer::IpBlock(b) if !everything(&b.cidr, &b.except)))
            });
            let admins = lists.admin.iter().chain(&lists.baseline).any(|&i| {
                self.cluster.admin_policies[i as usize]
                    .rules(dir)
                    .iter()
                    .flat_map(|r| &r.peers)
                    .any(|p| match p {
                        AdminPeer::Networks(n) => n.iter().any(|n| !everything(n, &[])),
                        AdminPeer::Nodes(_) => matches!(peer.kind, EndpointKind::Host(_)),
                        _ => false,
                    })
            });
            nps || admins
        };
        side(&flow.src, &flow.dst, Direction::Egress)
            || side(&flow.dst, &flow.src, Direction::Ingress)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Engine, Flow, Options};
    use palisade_model::Protocol;

    #[test]
    fn workloads_are_evaluated_by_selectors_and_cidr_rules_are_flagged() {
        let yaml = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  selector: {matchLabels: {app: db}}
  serviceName: db
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: i}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db, namespace: shop}
spec:
  podSelector: {matchLabels: {app: db}}
  ingress: [{from: [{podSelector: {matchLabels: {app: web}}}], ports: [{port: 5432}]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: shop}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8}}]}]
"#;
        let loaded = palisade_model::load_str(yaml).unwrap();
        let e = Engine::new(loaded.cluster, Options::default());
        let web = e
            .endpoint_for_pod(e.pod_id("shop", "web[Deployment]").unwrap(), None)
            .unwrap();
        let db = e
            .endpoint_for_pod(e.pod_id("shop", "db[StatefulSet]").unwrap(), None)
            .unwrap();
        let flow = |src, dst, port| Flow {
            src,
            dst,
            protocol: Protocol::Tcp,
            port,
        };
        let f = flow(web, db, 5432);
        assert!(e.evaluate(&f).allowed, "selected by labels");
        assert!(!e.depends_on_address(&f), "no CIDR involved");
        let f = flow(web, db, 80);
        assert!(!e.evaluate(&f).allowed, "the port differs");
        let f = flow(db, web, 80);
        assert!(
            !e.evaluate(&f).allowed,
            "outside the ipBlock at the unspecified address"
        );
        assert!(
            e.depends_on_address(&f),
            "but a real address could be inside it"
        );
    }
}
