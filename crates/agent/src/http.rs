//! The health and metrics endpoints: `GET /metrics`, `/healthz` and `/readyz` over plain
//! HTTP/1.1 (one request per connection), bound to loopback by default; and the metrics
//! endpoint alone (`GET /metrics`, nothing else) for an address Prometheus scrapes.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics::Metrics;

/// The longest request head read, and how long a client may take to send it.
const MAX_REQUEST: usize = 8192;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Which endpoints a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoints {
    /// `/metrics`, `/healthz` and `/readyz` (the `--listen` address, loopback by default).
    All,
    /// `/metrics` only, read-only (`--metrics-listen`, reachable from the cluster): every
    /// other path is 404 and every other method 405, so that nothing but the counters is
    /// exposed beyond the node.
    MetricsOnly,
}

/// Serves the endpoints until the listener fails. `refresh` runs before each scrape.
pub async fn serve(
    listener: TcpListener,
    endpoints: Endpoints,
    metrics: Arc<Metrics>,
    refresh: Arc<dyn Fn() + Send + Sync>,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        let refresh = refresh.clone();
        tokio::spawn(async move {
            if let Err(e) = respond(stream, endpoints, &metrics, &*refresh).await {
                tracing::debug!(error = %e, "metrics connection");
            }
        });
    }
}

async fn respond(
    mut stream: TcpStream,
    endpoints: Endpoints,
    metrics: &Metrics,
    refresh: &(dyn Fn() + Send + Sync),
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let n = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buf))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let health = endpoints == Endpoints::All;
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => {
            refresh();
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                metrics.encode(),
            )
        }
        ("GET", "/healthz") if health => ("200 OK", "text/plain", "ok\n".to_string()),
        ("GET", "/readyz") if health && metrics.ready() => (
            "200 OK",
            "text/plain",
            format!("ready\n{}", metrics.detail()),
        ),
        ("GET", "/readyz") if health => (
            "503 Service Unavailable",
            "text/plain",
            format!("not ready: {}\n", metrics.detail()),
        ),
        ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use super::*;

    /// The status line and body of one request `head` to a server of `endpoints`.
    async fn ask(endpoints: Endpoints, metrics: Arc<Metrics>, head: &str) -> (String, String) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, endpoints, metrics, Arc::new(|| {})));
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        server.abort();
        let (status, rest) = response.split_once("\r\n").unwrap();
        let body = rest.split_once("\r\n\r\n").unwrap().1;
        (status.to_string(), body.to_string())
    }

    #[tokio::test]
    async fn the_metrics_address_serves_metrics_and_nothing_else() {
        let metrics = Arc::new(Metrics::new());
        for (endpoints, head, status, why) in [
            (
                Endpoints::MetricsOnly,
                "GET /metrics HTTP/1.1\r\n\r\n",
                "200 OK",
                "the counters",
            ),
            (
                Endpoints::MetricsOnly,
                "GET /readyz HTTP/1.1\r\n\r\n",
                "404 Not Found",
                "readiness names the invalid objects: not exposed",
            ),
            (
                Endpoints::MetricsOnly,
                "GET /healthz HTTP/1.1\r\n\r\n",
                "404 Not Found",
                "health is the kubelet's, on loopback",
            ),
            (
                Endpoints::MetricsOnly,
                "GET / HTTP/1.1\r\n\r\n",
                "404 Not Found",
                "no index",
            ),
            (
                Endpoints::MetricsOnly,
                "POST /metrics HTTP/1.1\r\n\r\n",
                "405 Method Not Allowed",
                "read-only",
            ),
            (
                Endpoints::MetricsOnly,
                "DELETE /metrics HTTP/1.1\r\n\r\n",
                "405 Method Not Allowed",
                "read-only",
            ),
            (
                Endpoints::All,
                "GET /metrics HTTP/1.1\r\n\r\n",
                "200 OK",
                "loopback: metrics",
            ),
            (
                Endpoints::All,
                "GET /healthz HTTP/1.1\r\n\r\n",
                "200 OK",
                "loopback: health",
            ),
            (
                Endpoints::All,
                "GET /readyz HTTP/1.1\r\n\r\n",
                "503 Service Unavailable",
                "loopback: readiness (nothing loaded yet)",
            ),
        ] {
            let (got, body) = ask(endpoints, metrics.clone(), head).await;
            assert_eq!(
                got,
                format!("HTTP/1.1 {status}"),
                "{endpoints:?} {head:?}: {why}: {body}"
            );
            if status == "200 OK" && head.contains("/metrics") {
                assert!(body.contains("# EOF"), "{why}: {body}");
            }
        }
    }
}
