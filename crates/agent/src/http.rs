//! The health and metrics endpoints: `GET /metrics`, `/healthz` and `/readyz` over plain
//! HTTP/1.1 (one request per connection), bound to loopback by default.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics::Metrics;

/// The longest request head read, and how long a client may take to send it.
const MAX_REQUEST: usize = 8192;
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the endpoints until the listener fails. `refresh` runs before each scrape.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    refresh: Arc<dyn Fn() + Send + Sync>,
) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        let refresh = refresh.clone();
        tokio::spawn(async move {
            if let Err(e) = respond(stream, &metrics, &*refresh).await {
                tracing::debug!(error = %e, "metrics connection");
            }
        });
    }
}

async fn respond(
    mut stream: TcpStream,
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
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => {
            refresh();
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                metrics.encode(),
            )
        }
        ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_string()),
        ("GET", "/readyz") if metrics.ready() => (
            "200 OK",
            "text/plain",
            format!("ready\n{}", metrics.detail()),
        ),
        ("GET", "/readyz") => (
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
