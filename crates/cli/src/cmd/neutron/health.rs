//! The Neutron controller's `/metrics`, `/healthz` and `/readyz`: plain HTTP/1.1 on a
//! thread of its own, one request per connection.
//!
//! Ready means: the source reads its input, and the last sync succeeded and placed every
//! port. A port that could not be placed (closed, see docs/neutron.md), a failed sync, or a
//! source that cannot read its input (a directory moved away, a kind failing to list: the
//! last objects stay in force) makes `/readyz` answer 503 with the reason, and shows in
//! the metrics.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use palisade_neutron_sync::Report;

/// What the last sync found, and counts since the start.
#[derive(Debug, Default, Clone)]
struct State {
    /// Whether a sync has finished (successfully or not).
    synced: bool,
    /// Whether the last sync succeeded.
    ok: bool,
    /// Why not ready (empty when ready).
    detail: String,
    unplaceable: usize,
    unmatched: usize,
    refused: usize,
    syncs: u64,
    failures: u64,
    /// The parts of the source that cannot read their input, with the reason.
    source: std::collections::BTreeMap<String, String>,
}

/// The controller's health, shared between the loop and the endpoint.
#[derive(Debug, Default, Clone)]
pub struct Health(Arc<Mutex<State>>);

impl Health {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Records a sync that ran (its calls may have failed).
    pub fn synced(&self, r: &Report) {
        self.with(|s| {
            s.synced = true;
            s.syncs += 1;
            s.ok = r.ok();
            s.unplaceable = r.unplaceable.len();
            s.unmatched = r.unmatched.len();
            s.refused = r.refused.len();
            let mut why = Vec::new();
            if !r.ok() {
                s.failures += 1;
                why.push("the last sync failed".to_string());
            }
            for u in &r.unplaceable {
                why.push(format!(
                    "port {} closed, cannot be placed: {}",
                    u.port_id, u.reason
                ));
            }
            s.detail = why.join("\n");
        });
    }

    /// Records a sync that could not run.
    pub fn failed(&self, error: &str) {
        self.with(|s| {
            s.synced = true;
            s.syncs += 1;
            s.failures += 1;
            s.ok = false;
            s.detail = format!("the last sync failed: {error}");
        });
    }

    /// Records whether a part of the source can read its input.
    pub fn source(&self, part: &str, problem: Option<&str>) {
        self.with(|s| match problem {
            Some(p) => s.source.insert(part.to_string(), p.to_string()),
            None => s.source.remove(part),
        });
    }

    fn ready(&self) -> (bool, String) {
        self.with(|s| {
            let mut why: Vec<String> = s
                .source
                .iter()
                .map(|(part, p)| {
                    format!("source {part} cannot read its input (its objects stay in force): {p}")
                })
                .collect();
            if !s.synced {
                why.push("waiting for the first sync".into());
                return (false, why.join("\n"));
            }
            if !s.detail.is_empty() {
                why.push(s.detail.clone());
            }
            (
                s.ok && s.unplaceable == 0 && s.source.is_empty(),
                why.join("\n"),
            )
        })
    }

    /// The metrics in the Prometheus text format.
    pub fn metrics(&self) -> String {
        let s = self.with(|s| s.clone());
        let (ready, _) = self.ready();
        let rows: [(&str, &str, &str, u64); 7] = [
            (
                "ready",
                "gauge",
                "1 when the last sync succeeded and placed every port",
                u64::from(ready),
            ),
            (
                "unplaceable_ports",
                "gauge",
                "Ports closed because they hold two pods' addresses or share a pod's address with another port",
                s.unplaceable as u64,
            ),
            (
                "unmatched_pods",
                "gauge",
                "Pods no Neutron port has an address of",
                s.unmatched as u64,
            ),
            (
                "refused_groups",
                "gauge",
                "Groups named like this cluster's that belong to another project or name no cluster (not used)",
                s.refused as u64,
            ),
            (
                "source_unavailable",
                "gauge",
                "Parts of the source that cannot read their input (their objects stay in force)",
                s.source.len() as u64,
            ),
            ("syncs_total", "counter", "Syncs run", s.syncs),
            (
                "sync_failures_total",
                "counter",
                "Syncs that failed",
                s.failures,
            ),
        ];
        let mut out = String::new();
        for (name, kind, help, value) in rows {
            let name = format!("palisade_neutron_{name}");
            out += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
        }
        out
    }

    /// Serves the endpoints on `addr` from a thread of its own; the address bound.
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr)?;
        let bound = listener.local_addr()?;
        let health = self.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(e) = health.respond(stream) {
                    tracing::debug!(error = %e, "health connection");
                }
            }
        });
        Ok(bound)
    }

    fn respond(&self, mut stream: TcpStream) -> std::io::Result<()> {
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let head = String::from_utf8_lossy(&head);
        let mut words = head.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let (status, body) = match (method, path) {
            ("GET", "/metrics") => ("200 OK", self.metrics()),
            ("GET", "/healthz") => ("200 OK", "ok\n".into()),
            ("GET", "/readyz") => match self.ready() {
                (true, _) => ("200 OK", "ready\n".into()),
                (false, why) => ("503 Service Unavailable", format!("not ready: {why}\n")),
            },
            ("GET", _) => ("404 Not Found", "not found\n".into()),
            _ => ("405 Method Not Allowed", "only GET\n".into()),
        };
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }
}
