//! The health and metrics endpoints: `GET /metrics`, `/healthz` and `/readyz` over plain
//! HTTP/1.1 (hyper; one request per connection), bound to loopback by default; and the
//! metrics endpoint alone (`GET /metrics`, nothing else) for an address Prometheus scrapes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONNECTION, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// How long a client may take to send its request head.
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
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let response = respond(&request, endpoints, &metrics, &*refresh);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(READ_TIMEOUT)
                .keep_alive(false)
                .title_case_headers(true)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "metrics connection");
            }
        });
    }
}

/// The answer to one request: status, content type and body as before hyper.
fn respond(
    request: &Request<Incoming>,
    endpoints: Endpoints,
    metrics: &Metrics,
    refresh: &(dyn Fn() + Send + Sync),
) -> Response<Full<Bytes>> {
    let health = endpoints == Endpoints::All;
    let get = request.method() == Method::GET;
    let (status, content_type, body) = match (
        get,
        request.uri().path_and_query().map_or("", |p| p.as_str()),
    ) {
        (true, "/metrics") => {
            refresh();
            (
                StatusCode::OK,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                metrics.encode(),
            )
        }
        (true, "/healthz") if health => (StatusCode::OK, "text/plain", "ok\n".to_string()),
        (true, "/learned") if health => (StatusCode::OK, "text/plain", metrics.learned()),
        (true, "/readyz") if health && metrics.ready() => (
            StatusCode::OK,
            "text/plain",
            format!("ready\n{}", metrics.detail()),
        ),
        (true, "/readyz") if health => (
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!("not ready: {}\n", metrics.detail()),
        ),
        (true, _) => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found\n".to_string(),
        ),
        (false, _) => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".to_string(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

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
