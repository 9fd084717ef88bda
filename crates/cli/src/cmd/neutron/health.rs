//! The Neutron controller's `/metrics`, `/healthz` and `/readyz`: plain HTTP/1.1 (hyper)
//! on a task of its own, one request per connection.
//!
//! Ready means: the source reads its input, and the last sync succeeded and placed every
//! port. A port that could not be placed (closed, see docs/neutron.md), a failed sync, or a
//! source that cannot read its input (a directory moved away, a kind failing to list: the
//! last objects stay in force) makes `/readyz` answer 503 with the reason, and shows in
//! the metrics.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

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

    /// Serves the endpoints on `addr` from a task of its own (on the current tokio
    /// runtime); the address bound.
    pub fn serve(&self, addr: SocketAddr) -> std::io::Result<SocketAddr> {
        let listener = std::net::TcpListener::bind(addr)?;
        let bound = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let health = self.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let health = health.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let response = health.respond(&request);
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let connection = http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(Duration::from_secs(5))
                        .keep_alive(false)
                        .title_case_headers(true)
                        .serve_connection(TokioIo::new(stream), service);
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "health connection");
                    }
                });
            }
        });
        Ok(bound)
    }

    /// The answer to one request: status and body as before hyper.
    fn respond(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        let get = request.method() == Method::GET;
        let path = request.uri().path_and_query().map_or("", |p| p.as_str());
        let (status, body) = match (get, path) {
            (true, "/metrics") => (StatusCode::OK, self.metrics()),
            (true, "/healthz") => (StatusCode::OK, "ok\n".into()),
            (true, "/readyz") => match self.ready() {
                (true, _) => (StatusCode::OK, "ready\n".into()),
                (false, why) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("not ready: {why}\n"),
                ),
            },
            (true, _) => (StatusCode::NOT_FOUND, "not found\n".into()),
            (false, _) => (StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into()),
        };
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
        response
    }
}
