//! Which ports a connection between two endpoints may use: the port space of a protocol cut
//! into runs of consecutive ports that every policy treats alike, each with its verdict.

use std::collections::BTreeSet;

use palisade_engine::{Endpoint, Flow, Verdict};
use palisade_model::{Port, PortRange, Protocol};

use crate::Analysis;

/// A run of consecutive ports of one protocol with one verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSegment {
    /// Protocol.
    pub protocol: Protocol,
    /// The ports, inclusive.
    pub range: PortRange,
    /// The verdict on every port of the run.
    pub verdict: Verdict,
}

impl Analysis<'_> {
    /// The verdicts on every port of `within` from `src` to `dst` over `protocol`, as runs of
    /// consecutive ports with equal verdicts, in port order. One evaluation per run of ports
    /// that no policy tells apart, not one per port.
    pub fn port_segments(
        &self,
        src: Endpoint,
        dst: Endpoint,
        protocol: Protocol,
        within: PortRange,
    ) -> Vec<PortSegment> {
        self.port_segments_cut(src, dst, protocol, within, &self.policy_port_cuts())
    }

    /// [`Analysis::port_segments`] with the policies' cuts computed once by the caller.
    pub(crate) fn port_segments_cut(
        &self,
        src: Endpoint,
        dst: Endpoint,
        protocol: Protocol,
        within: PortRange,
        policy_cuts: &BTreeSet<u32>,
    ) -> Vec<PortSegment> {
        let cuts: Vec<u32> = self
            .port_cuts(&dst, within, policy_cuts)
            .into_iter()
            .collect();
        let end = u32::from(within.end.get());
        let mut out: Vec<PortSegment> = Vec::new();
        for (i, &start) in cuts.iter().enumerate() {
            let last = cuts.get(i + 1).map_or(end, |next| next - 1);
            let port = |n: u32| Port::new(i64::from(n)).unwrap_or(within.end);
            let verdict = self.engine.evaluate(&Flow {
                src,
                dst,
                protocol,
                port: port(start).get(),
            });
            match out.last_mut() {
                Some(prev) if prev.verdict == verdict => prev.range.end = port(last),
                _ => out.push(PortSegment {
                    protocol,
                    range: PortRange {
                        start: port(start),
                        end: port(last),
                    },
                    verdict,
                }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use palisade_engine::{Engine, Options};

    use super::*;

    const CLUSTER: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x, labels: {app: a}}
status: {podIP: 10.0.0.1}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {app: b}}
spec: {containers: [{name: c, ports: [{containerPort: 9000, name: metrics}]}]}
status: {podIP: 10.0.0.2}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b, namespace: x}
spec:
  podSelector: {matchLabels: {app: b}}
  ingress:
  - ports: [{port: 80}, {port: 8080, endPort: 8090}, {port: metrics}, {protocol: UDP, port: 53}]
---
apiVersion: policy.networking.k8s.io/v1alpha1
kind: AdminNetworkPolicy
metadata: {name: deny-8085}
spec:
  priority: 1
  subject: {namespaces: {}}
  ingress:
  - {action: Deny, from: [{namespaces: {}}], ports: [{portNumber: {port: 8085}}]}
"#;

    fn engine() -> Engine {
        let loaded = palisade_model::load_str(CLUSTER).unwrap();
        Engine::new(loaded.cluster, Options::default())
    }

    fn everything() -> PortRange {
        PortRange {
            start: Port::new(1).unwrap(),
            end: Port::new(65535).unwrap(),
        }
    }

    #[test]
    fn segments_are_the_allowed_runs() {
        let e = engine();
        let a = e
            .endpoint_for_pod(e.pod_id("x", "a").unwrap(), None)
            .unwrap();
        let b = e
            .endpoint_for_pod(e.pod_id("x", "b").unwrap(), None)
            .unwrap();
        let allowed: Vec<String> = Analysis::new(&e)
            .port_segments(a, b, Protocol::Tcp, everything())
            .into_iter()
            .filter(|s| s.verdict.allowed)
            .map(|s| s.range.to_string())
            .collect();
        assert_eq!(
            allowed,
            ["80", "8080-8084", "8086-8090", "9000"],
            "numbers, a range cut by an admin deny, a named port"
        );
        let udp: Vec<String> = Analysis::new(&e)
            .port_segments(a, b, Protocol::Udp, everything())
            .into_iter()
            .filter(|s| s.verdict.allowed)
            .map(|s| s.range.to_string())
            .collect();
        assert_eq!(udp, ["53"], "UDP has its own ports");
    }

    #[test]
    fn segments_agree_with_evaluating_every_port() {
        let e = engine();
        let a = e
            .endpoint_for_pod(e.pod_id("x", "a").unwrap(), None)
            .unwrap();
        let b = e
            .endpoint_for_pod(e.pod_id("x", "b").unwrap(), None)
            .unwrap();
        for (src, dst) in [(a, b), (b, a)] {
            for protocol in Protocol::ALL {
                let segments = Analysis::new(&e).port_segments(src, dst, protocol, everything());
                assert_eq!(segments[0].range.start.get(), 1, "starts at the first port");
                assert_eq!(
                    segments.last().unwrap().range.end.get(),
                    65535,
                    "covers all"
                );
                for w in segments.windows(2) {
                    assert_eq!(
                        w[0].range.end.get() + 1,
                        w[1].range.start.get(),
                        "contiguous"
                    );
                    assert_ne!(w[0].verdict, w[1].verdict, "adjacent runs differ");
                }
                for s in &segments {
                    for port in s.range.start.get()..=s.range.end.get() {
                        let v = e.evaluate(&Flow {
                            src,
                            dst,
                            protocol,
                            port,
                        });
                        assert_eq!(v, s.verdict, "{protocol}/{port}");
                    }
                }
            }
        }
    }

    #[test]
    fn segments_stay_within_the_range_asked() {
        let e = engine();
        let a = e
            .endpoint_for_pod(e.pod_id("x", "a").unwrap(), None)
            .unwrap();
        let b = e
            .endpoint_for_pod(e.pod_id("x", "b").unwrap(), None)
            .unwrap();
        let within = PortRange {
            start: Port::new(8083).unwrap(),
            end: Port::new(8087).unwrap(),
        };
        let s: Vec<(String, bool)> = Analysis::new(&e)
            .port_segments(a, b, Protocol::Tcp, within)
            .into_iter()
            .map(|s| (s.range.to_string(), s.verdict.allowed))
            .collect();
        assert_eq!(
            s,
            [
                ("8083-8084".to_string(), true),
                ("8085".to_string(), false),
                ("8086-8087".to_string(), true)
            ]
        );
    }
}
