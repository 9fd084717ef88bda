//! A real Neutron for the tests: `PALISADE_NEUTRON_URL`, or one started with
//! `deploy/neutron/dev-server.sh`; each test works in a project of its own.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers

use std::net::IpAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use palisade_neutron_sync::client::{Client, Credentials, Retry};
use palisade_neutron_sync::state::PortFilter;
use serde_json::{Value, json};

/// The Neutron URL, starting the development server when none is given (and stopping it
/// when the test binary exits). `None` (with the reason printed) only outside CI for a
/// user who cannot start it; in CI, or as root, a missing server fails the test.
pub fn neutron_url() -> Option<String> {
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    let url = URL.get_or_init(|| {
        if let Ok(url) = std::env::var("PALISADE_NEUTRON_URL") {
            return Ok(url);
        }
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/neutron/dev-server.sh");
        // The server this run starts is stopped when the test binary exits; until then no
        // other test binary may take it over (it waits for the lock instead).
        let state =
            std::env::var("PALISADE_NEUTRON_STATE").unwrap_or("/tmp/palisade-neutron".into());
        let script_text = script.to_string_lossy();
        let guard = palisade_test_support::StopAtExit::lock(
            Path::new(&format!("{state}.tests.lock")),
            &["bash", &script_text, "stop"],
        )
        .map_err(|e| format!("cannot arrange to stop the server at exit: {e}"))?;
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg("start")
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match stdout
            .lines()
            .filter_map(|l| l.strip_prefix("export PALISADE_NEUTRON_URL="))
            .next_back()
        {
            Some(url) if out.status.success() => {
                // A server already running (outside the lock) is someone else's: left alone.
                if String::from_utf8_lossy(&out.stderr).contains("already running") {
                    guard.keep();
                } else {
                    guard.arm();
                }
                Ok(url.to_string())
            }
            _ => Err(format!(
                "{} start failed:\n{}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    });
    match url {
        Ok(u) => Some(u.clone()),
        Err(e) => {
            // Root can start the server, so failing to is a failure, not a reason to skip.
            if palisade_test_support::is_root() {
                panic!(
                    "no Neutron to test against (set PALISADE_NEUTRON_URL or let deploy/neutron/dev-server.sh start one): {e}"
                );
            }
            palisade_test_support::unavailable(
                "the Neutron tests",
                &format!(
                    "no Neutron (set PALISADE_NEUTRON_URL, or run deploy/neutron/dev-server.sh as root): {e}"
                ),
            );
            None
        }
    }
}

/// A project id no other test run uses.
pub fn project(test: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("t-{test}-{}-{nanos}", std::process::id())
}

/// A project id no other test run uses, in the UUID form Keystone gives (Neutron wants
/// one as the target of an RBAC policy).
pub fn project_uuid() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let hex = format!("{:08x}{:024x}", std::process::id(), nanos);
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// A client of `url` in `project`.
pub fn client(url: &str, project: &str) -> Client {
    Client::new(
        url,
        Credentials::Headers {
            project_id: project.to_string(),
            user_id: "palisade-test".into(),
        },
        Retry::default(),
    )
}

/// A network with an IPv4 and an IPv6 subnet, and one port per address (bulk), as a
/// CNI would have made them for the pods. Returns the network id.
pub fn make_ports(c: &Client, ips: &[IpAddr]) -> String {
    let net = c
        .post("networks", &json!({"network": {"name": "pods"}}))
        .unwrap();
    let net_id = net["network"]["id"].as_str().unwrap().to_string();
    let v4 = c
        .post("subnets", &json!({"subnet": {"network_id": net_id, "ip_version": 4, "cidr": "10.0.0.0/8", "gateway_ip": null}}))
        .unwrap();
    let v6 = c
        .post("subnets", &json!({"subnet": {"network_id": net_id, "ip_version": 6, "cidr": "fd00::/64", "gateway_ip": null}}))
        .unwrap();
    let subnet = |ip: &IpAddr| {
        let s = if ip.is_ipv4() { &v4 } else { &v6 };
        s["subnet"]["id"].as_str().unwrap().to_string()
    };
    for chunk in ips.chunks(100) {
        let ports: Vec<Value> = chunk
            .iter()
            .map(|ip| {
                json!({"network_id": net_id, "device_owner": "compute:kuryr",
                       "fixed_ips": [{"subnet_id": subnet(ip), "ip_address": ip.to_string()}]})
            })
            .collect();
        c.post("ports", &json!({"ports": ports})).unwrap();
    }
    net_id
}

/// Ports for every address of `pods`, on a network of their own ([`make_ports`]), and the
/// filter that picks exactly those ports.
pub fn pod_ports(c: &Client, pods: &[palisade_model::Pod]) -> PortFilter {
    let ips: Vec<IpAddr> = pods.iter().flat_map(|p| p.ips.clone()).collect();
    PortFilter {
        network_id: Some(make_ports(c, &ips)),
        device_owner: None,
    }
}

/// What a proxy does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward it.
    None,
    /// Answer with this status without forwarding.
    Refuse(u16),
    /// Forward it (Neutron does the work), then answer with this status: a lost answer.
    LoseAnswer(u16),
}

/// A loopback proxy in front of `upstream` that answers a request with `status` (and a
/// Neutron error body) instead of forwarding it when `fault(method, path)` says so; every
/// other request is forwarded as it is. Returns the proxy's URL; it serves until the test
/// ends.
pub fn faulty_proxy(
    upstream: &str,
    status: u16,
    mut fault: impl FnMut(&str, &str) -> bool + Send + 'static,
) -> String {
    proxy(upstream, move |m, p| {
        if fault(m, p) {
            Fault::Refuse(status)
        } else {
            Fault::None
        }
    })
}

/// A loopback proxy in front of `upstream` that does to each request what
/// `fault(method, path)` says. Returns the proxy's URL; it serves until the test ends.
pub fn proxy(upstream: &str, fault: impl FnMut(&str, &str) -> Fault + Send + 'static) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut fault = fault;
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                continue;
            }
            let mut headers = Vec::new();
            let mut length = 0;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                if h == "\r\n" || h.is_empty() {
                    break;
                }
                let lower = h.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                if !lower.starts_with("connection:") {
                    headers.push(h);
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut parts = request_line.split_whitespace();
            let (method, path) = (
                parts.next().unwrap_or("").to_string(),
                parts.next().unwrap_or("").to_string(),
            );
            let injected = |status: u16| {
                let body = format!(
                    r#"{{"NeutronError": {{"message": "injected failure of {method} {path}"}}}}"#
                );
                format!("HTTP/1.1 {status} Injected\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                    .into_bytes()
            };
            let action = fault(&method, &path);
            let reply = if let Fault::Refuse(status) = action {
                injected(status)
            } else {
                let mut up = TcpStream::connect(&upstream).unwrap();
                let mut req = request_line.into_bytes();
                for h in &headers {
                    req.extend_from_slice(h.as_bytes());
                }
                req.extend_from_slice(b"Connection: close\r\n\r\n");
                req.extend_from_slice(&body);
                up.write_all(&req).unwrap();
                let mut out = Vec::new();
                up.read_to_end(&mut out).unwrap();
                match action {
                    Fault::LoseAnswer(status) => injected(status),
                    _ => out,
                }
            };
            let _ = stream.write_all(&reply);
        }
    });
    url
}

/// A small generated cluster (10 pods, 4 NetworkPolicies) of `seed`.
pub fn generated(seed: u64) -> palisade_gen::Generated {
    palisade_gen::generate(&palisade_gen::Spec {
        pods: 10,
        policies: 4,
        seed,
        admin: false,
    })
}

/// The evaluator of a generated cluster and its policies.
pub fn engine(g: &palisade_gen::Generated) -> palisade_engine::Engine {
    palisade_engine::Engine::new(g.load().unwrap(), palisade_engine::Options::default())
}

/// The default translation of `e` into security groups.
pub fn translation(e: &palisade_engine::Engine) -> palisade_neutron::Translation {
    palisade_neutron::translate(e, &palisade_neutron::TranslateOptions::default())
        .unwrap()
        .0
}
