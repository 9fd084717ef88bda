//! The validation table of Services and EndpointSlices: each invalid object with the first
//! error Palisade gives (`line: field: message` prefix), and valid objects at the same
//! limits. The model's tests check the messages; the API-server parity test checks that
//! the real API server accepts and refuses the same objects.

/// A Service `x/s` with `spec` (indented two spaces).
pub fn svc(spec: &str) -> String {
    format!("apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: x\nspec:\n{spec}")
}

/// An EndpointSlice `x/s-1` of Service `s` with `body` (its top-level fields).
pub fn slice(body: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: s-1\n  namespace: x\n  labels: {{kubernetes.io/service-name: s}}\n{body}"
    )
}

/// Each rule, and the first error it gives (`line: field: message` prefix).
pub fn invalid() -> Vec<(&'static str, String, &'static str)> {
    vec![
        ("service name is a DNS label", "apiVersion: v1\nkind: Service\nmetadata:\n  name: Bad_Name\nspec:\n  ports: [{port: 80}]\n".to_string(), "4: metadata.name: invalid value \"Bad_Name\""),
        ("ports required", svc("  selector: {app: a}\n"), "6: spec.ports: Required value"),
        ("port 0", svc("  ports: [{port: 0}]\n"), "7: spec.ports[0].port: Invalid value: 0"),
        ("port 65536", svc("  ports: [{port: 65536}]\n"), "7: spec.ports[0].port: Invalid value: 65536"),
        ("name required with two ports", svc("  ports:\n  - {name: a, port: 80}\n  - {port: 81}\n"), "9: spec.ports[1].name: Required value"),
        ("port name is a DNS label", svc("  ports: [{name: Http, port: 80}]\n"), "7: spec.ports[0].name: invalid value \"Http\""),
        ("port names unique", svc("  ports:\n  - {name: a, port: 80}\n  - {name: a, port: 81}\n"), "9: spec.ports[1].name: Duplicate value: \"a\""),
        ("port and protocol unique", svc("  ports:\n  - {name: a, port: 80}\n  - {name: b, port: 80}\n"), "9: spec.ports[1]: Duplicate value"),
        ("protocol", svc("  ports: [{port: 80, protocol: ICMP}]\n"), "7: spec.ports[0].protocol: Unsupported value: \"ICMP\""),
        ("target port number", svc("  ports: [{port: 80, targetPort: 70000}]\n"), "7: spec.ports[0].targetPort: Invalid value: 70000"),
        ("target port name", svc("  ports: [{port: 80, targetPort: not_a_name}]\n"), "7: spec.ports[0].targetPort: invalid port name"),
        ("node port on ClusterIP", svc("  ports: [{port: 80, nodePort: 30080}]\n"), "7: spec.ports[0].nodePort: Forbidden"),
        ("node port range", svc("  type: NodePort\n  ports: [{port: 80, nodePort: 70000}]\n"), "8: spec.ports[0].nodePort: Invalid value: 70000"),
        ("type", svc("  type: Internal\n  ports: [{port: 80}]\n"), "7: spec.type: Unsupported value: \"Internal\""),
        ("cluster IP", svc("  clusterIP: 10.96.0.300\n  ports: [{port: 80}]\n"), "7: spec.clusterIP: Invalid value: \"10.96.0.300\""),
        ("cluster IPs agree", svc("  clusterIP: 10.96.0.10\n  clusterIPs: [10.96.0.11]\n  ports: [{port: 80}]\n"), "8: spec.clusterIPs[0]: Invalid value: \"10.96.0.11\": must match `clusterIP`"),
        ("one cluster IP per family", svc("  clusterIPs: [10.96.0.10, 10.96.0.11]\n  ports: [{port: 80}]\n"), "7: spec.clusterIPs: Invalid value: may specify no more than one IP for each IP family"),
        ("headless NodePort", svc("  type: NodePort\n  clusterIP: None\n  ports: [{port: 80}]\n"), "8: spec.clusterIP: Invalid value: \"None\": may not be set to 'None' for NodePort services"),
        ("externalTrafficPolicy on ClusterIP", svc("  externalTrafficPolicy: Local\n  ports: [{port: 80}]\n"), "7: spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for externally-accessible services"),
        ("externalTrafficPolicy value", svc("  type: NodePort\n  externalTrafficPolicy: Nearby\n  ports: [{port: 80}]\n"), "8: spec.externalTrafficPolicy: Unsupported value: \"Nearby\""),
        ("externalName required", svc("  type: ExternalName\n"), "6: spec.externalName: Required value"),
        ("externalName syntax", svc("  type: ExternalName\n  externalName: Bad_Name\n"), "8: spec.externalName: invalid value \"Bad_Name\""),
        ("no cluster IP for ExternalName", svc("  type: ExternalName\n  externalName: db.example.com\n  clusterIP: 10.96.0.10\n"), "9: spec.clusterIP: Invalid value: \"10.96.0.10\": may not be set for ExternalName services"),
        ("selector label value", svc("  selector: {app: -a-}\n  ports: [{port: 80}]\n"), "7: spec.selector.app: invalid label value"),
        ("ipFamilies value", svc("  ipFamilies: [IPv5]\n  ports: [{port: 80}]\n"), "7: spec.ipFamilies[0]: Unsupported value: \"IPv5\""),
        ("external IP", svc("  externalIPs: [203.0.113.300]\n  ports: [{port: 80}]\n"), "7: spec.externalIPs[0]: Invalid value: \"203.0.113.300\""),
        ("slice address type required", slice("endpoints: []\n"), "1: addressType: Required value"),
        ("slice address type", slice("addressType: IPv5\nendpoints: []\n"), "7: addressType: Unsupported value: \"IPv5\""),
        ("slice address family", slice("addressType: IPv4\nendpoints:\n- addresses: [\"fd00::1\"]\n"), "9: endpoints[0].addresses[0]: Invalid value: \"fd00::1\": must be a valid IPv4 address"),
        ("slice address syntax", slice("addressType: IPv4\nendpoints:\n- addresses: [10.0.0.300]\n"), "9: endpoints[0].addresses[0]: Invalid value: \"10.0.0.300\""),
        ("slice endpoint needs an address", slice("addressType: IPv4\nendpoints:\n- addresses: []\n"), "9: endpoints[0].addresses: Required value"),
        ("slice port names unique", slice("addressType: IPv4\nendpoints: []\nports:\n- {name: a, port: 80}\n- {name: a, port: 81}\n"), "11: ports[1].name: Duplicate value: \"a\""),
        ("slice port name", slice("addressType: IPv4\nendpoints: []\nports: [{name: A_B, port: 80}]\n"), "9: ports[0].name: invalid value \"A_B\""),
        ("slice version", "apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata:\n  name: s\naddressType: IPv4\nendpoints: []\n".to_string(), "1: apiVersion: Unsupported value: \"discovery.k8s.io/v1beta1\""),
        ("misspelt discovery kind", "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlices\nmetadata:\n  name: s\n".to_string(), "2: kind: Unsupported value: \"EndpointSlices\""),
    ]
}

/// Valid objects at the same limits.
pub fn valid() -> Vec<(&'static str, String)> {
    vec![
        ("ports 1 and 65535", svc("  ports:\n  - {name: a, port: 1}\n  - {name: b, port: 65535}\n")),
        ("one unnamed port", svc("  ports: [{port: 80}]\n")),
        ("service name with a leading digit", "apiVersion: v1\nkind: Service\nmetadata:\n  name: 1abc\n  namespace: x\nspec:\n  ports: [{port: 80}]\n".to_string()),
        ("same port, two protocols", svc("  ports:\n  - {name: a, port: 53, protocol: UDP}\n  - {name: b, port: 53}\n")),
        ("named target port", svc("  ports: [{port: 80, targetPort: http}]\n")),
        ("headless without ports", svc("  clusterIP: None\n  selector: {app: a}\n")),
        ("NodePort with a node port", svc("  type: NodePort\n  externalTrafficPolicy: Local\n  ports: [{port: 80, nodePort: 30080}]\n")),
        ("LoadBalancer", svc("  type: LoadBalancer\n  ports: [{port: 443}]\n")),
        ("ExternalName", svc("  type: ExternalName\n  externalName: db.example.com\n")),
        ("dual-stack cluster IPs", svc("  clusterIPs: [10.96.0.10, \"fd00:10:96::10\"]\n  ipFamilyPolicy: RequireDualStack\n  ports: [{port: 80}]\n")),
        ("slice", slice("addressType: IPv4\nendpoints:\n- addresses: [10.0.0.1]\n  conditions: {ready: false}\nports: [{name: http, port: 8080}]\n")),
        ("slice without endpoints", slice("addressType: IPv6\nendpoints: []\n")),
        ("slice port without number", slice("addressType: IPv4\nendpoints: []\nports: [{name: a}]\n")),
        ("slice ports 0 and 65536 (stored; no traffic goes to them)", slice("addressType: IPv4\nendpoints: []\nports:\n- {name: a, port: 0}\n- {name: b, port: 65536}\n")),
    ]
}
