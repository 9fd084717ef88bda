//! The Neutron API over HTTP: JSON in and out, identity headers or a Keystone token,
//! retries with backoff for server errors and broken connections, and a count of every
//! call made (the sync's performance figure).

use std::cell::Cell;
use std::time::Duration;

use serde_json::Value;

/// How the client proves who it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// A Neutron that trusts identity headers (its paste pipeline without `authtoken`):
    /// `X-Project-Id`, `X-User-Id`, `X-Roles`. For development and tests.
    Headers {
        /// The project the groups and ports belong to.
        project_id: String,
        /// The user the calls are made as.
        user_id: String,
    },
    /// A Keystone token (`X-Auth-Token`) scoped to a project.
    Token {
        /// The token.
        token: String,
        /// The project the token is scoped to.
        project_id: String,
    },
}

impl Credentials {
    /// The project the calls act in: the groups the sync owns belong to it.
    pub fn project_id(&self) -> &str {
        match self {
            Credentials::Headers { project_id, .. } | Credentials::Token { project_id, .. } => {
                project_id
            }
        }
    }
}

/// Retry policy for server errors (5xx) and connection errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all (at least 1).
    pub attempts: u32,
    /// The wait before the first retry; doubled after each.
    pub first_backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 5,
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// HTTP methods the sync uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Read.
    Get,
    /// Create.
    Post,
    /// Update or replace.
    Put,
    /// Delete.
    Delete,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// Calls made, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// GET calls.
    pub reads: usize,
    /// POST, PUT and DELETE calls.
    pub writes: usize,
    /// Attempts repeated after a server or connection error.
    pub retries: usize,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Neutron answered with an error status.
    #[error("{method} {path}: HTTP {status}: {message}")]
    Status {
        /// The method.
        method: &'static str,
        /// The path.
        path: String,
        /// The HTTP status.
        status: u16,
        /// Neutron's message (or the body).
        message: String,
    },
    /// The server could not be reached, or the connection broke (after every retry).
    #[error("{method} {path}: {source}")]
    Transport {
        /// The method.
        method: &'static str,
        /// The path.
        path: String,
        /// The transport error.
        #[source]
        source: ureq::Error,
    },
    /// The answer was not the JSON expected.
    #[error("{method} {path}: unexpected answer: {message}")]
    Decode {
        /// The method.
        method: &'static str,
        /// The path.
        path: String,
        /// What was wrong.
        message: String,
    },
}

impl ApiError {
    /// The HTTP status, when Neutron answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A Neutron API endpoint with credentials.
pub struct Client {
    agent: ureq::Agent,
    base: String,
    credentials: Credentials,
    retry: Retry,
    counts: Cell<Counts>,
}

impl Client {
    /// A client of the Neutron at `endpoint` (`http://host:9696`, with or without a
    /// trailing `/v2.0`), trusting the usual web roots for HTTPS.
    pub fn new(endpoint: &str, credentials: Credentials, retry: Retry) -> Client {
        Client::with_roots(endpoint, credentials, retry, None)
    }

    /// [`Client::new`], trusting only the certificates of `roots` for HTTPS when given
    /// (a cloud's own CA: `OS_CACERT`, clouds.yaml `cacert`).
    pub fn with_roots(
        endpoint: &str,
        credentials: Credentials,
        retry: Retry,
        roots: Option<&[ureq::tls::Certificate<'static>]>,
    ) -> Client {
        let agent = agent(Duration::from_secs(600), roots);
        let base = endpoint.trim_end_matches('/');
        let base = base.strip_suffix("/v2.0").unwrap_or(base).to_string();
        Client {
            agent,
            base,
            credentials,
            retry,
            counts: Cell::new(Counts::default()),
        }
    }

    /// The calls made so far.
    pub fn counts(&self) -> Counts {
        self.counts.get()
    }

    /// The project the client acts in.
    pub fn project_id(&self) -> &str {
        self.credentials.project_id()
    }

    /// The retry policy.
    pub fn retry(&self) -> Retry {
        self.retry
    }

    /// `POST /v2.0/<path>`, attempted once: for a creation whose answer may be lost after
    /// Neutron made the object, where the caller looks it up before trying again.
    pub fn post_once(&self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.count(Method::Post);
        self.once(Method::Post, path, Some(body))
    }

    fn count(&self, method: Method) {
        let mut counts = self.counts.get();
        if method == Method::Get {
            counts.reads += 1;
        } else {
            counts.writes += 1;
        }
        self.counts.set(counts);
    }

    /// `GET /v2.0/<path>`.
    pub fn get(&self, path: &str) -> Result<Value, ApiError> {
        self.call(Method::Get, path, None)
    }

    /// `POST /v2.0/<path>` with a JSON body.
    pub fn post(&self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.call(Method::Post, path, Some(body))
    }

    /// `PUT /v2.0/<path>` with a JSON body.
    pub fn put(&self, path: &str, body: &Value) -> Result<Value, ApiError> {
        self.call(Method::Put, path, Some(body))
    }

    /// `DELETE /v2.0/<path>`.
    pub fn delete(&self, path: &str) -> Result<(), ApiError> {
        self.call(Method::Delete, path, None).map(|_| ())
    }

    /// One call, retried on 5xx and connection errors with exponential backoff.
    pub fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.count(method);
        let mut backoff = self.retry.first_backoff;
        let mut attempt = 1;
        loop {
            match self.once(method, path, body) {
                Err(e) if attempt < self.retry.attempts && retryable(&e) => {
                    let mut counts = self.counts.get();
                    counts.retries += 1;
                    self.counts.set(counts);
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(self.retry.max_backoff);
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn once(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, ApiError> {
        let url = format!("{}/v2.0/{}", self.base, path);
        let transport = |source| ApiError::Transport {
            method: method.as_str(),
            path: path.to_string(),
            source,
        };
        let headers: Vec<(&str, &str)> = match &self.credentials {
            Credentials::Headers {
                project_id,
                user_id,
            } => vec![
                ("X-Project-Id", project_id),
                ("X-User-Id", user_id),
                ("X-Roles", "member,reader"),
            ],
            Credentials::Token { token, .. } => vec![("X-Auth-Token", token)],
        };
        let result = match method {
            Method::Get | Method::Delete => {
                let mut req = if method == Method::Get {
                    self.agent.get(&url)
                } else {
                    self.agent.delete(&url)
                };
                for (k, v) in &headers {
                    req = req.header(*k, *v);
                }
                req.header("Accept", "application/json").call()
            }
            Method::Post | Method::Put => {
                let mut req = if method == Method::Post {
                    self.agent.post(&url)
                } else {
                    self.agent.put(&url)
                };
                for (k, v) in &headers {
                    req = req.header(*k, *v);
                }
                let text = body.map(Value::to_string).unwrap_or_default();
                req.header("Accept", "application/json")
                    .content_type("application/json")
                    .send(text.as_str())
            }
        };
        let mut response = result.map_err(transport)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_string()
            .map_err(transport)?;
        if !(200..300).contains(&status) {
            return Err(ApiError::Status {
                method: method.as_str(),
                path: path.to_string(),
                status,
                message: neutron_message(&text),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| ApiError::Decode {
            method: method.as_str(),
            path: path.to_string(),
            message: e.to_string(),
        })
    }
}

/// An HTTP agent that hands back error statuses as responses, with `roots` as the only
/// trusted certificates when given.
pub fn agent(timeout: Duration, roots: Option<&[ureq::tls::Certificate<'static>]>) -> ureq::Agent {
    let mut config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout));
    if let Some(roots) = roots {
        config = config.tls_config(
            ureq::tls::TlsConfig::builder()
                .root_certs(ureq::tls::RootCerts::new_with_certs(roots))
                .build(),
        );
    }
    config.build().into()
}

/// The certificates of a PEM file.
pub fn read_roots(path: &std::path::Path) -> Result<Vec<ureq::tls::Certificate<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
            Ok(_) => None,
            Err(e) => Some(Err(format!("{}: {e}", path.display()))),
        })
        .collect::<Result<_, _>>()?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// Whether an error is worth another attempt: a server error or a broken connection.
pub fn retryable(e: &ApiError) -> bool {
    match e {
        ApiError::Status { status, .. } => *status >= 500,
        ApiError::Transport { .. } => true,
        ApiError::Decode { .. } => false,
    }
}

/// Neutron's error message (`{"NeutronError": {"message": ...}}`), else the body.
fn neutron_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["NeutronError"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// A loopback server answering each request with the next of `replies` (status, body).
    fn serve(replies: Vec<(u16, &'static str)>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for (stream, (status, body)) in listener.incoming().zip(replies) {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                    line.clear();
                }
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
        });
        url
    }

    fn client(url: &str) -> Client {
        let retry = Retry {
            attempts: 3,
            first_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        };
        let creds = Credentials::Headers {
            project_id: "p".into(),
            user_id: "u".into(),
        };
        Client::new(url, creds, retry)
    }

    #[test]
    fn server_errors_are_retried_with_backoff() {
        let url = serve(vec![(503, "{}"), (500, "{}"), (200, r#"{"ports": []}"#)]);
        let c = client(&url);
        assert_eq!(
            c.get("ports").unwrap(),
            serde_json::json!({"ports": []}),
            "the third attempt answers"
        );
        assert_eq!(
            c.counts(),
            Counts {
                reads: 1,
                writes: 0,
                retries: 2
            },
            "one call, two retries"
        );
    }

    #[test]
    fn client_errors_are_not_retried_and_keep_neutrons_message() {
        let url = serve(vec![(
            409,
            r#"{"NeutronError": {"message": "Security group rule already exists."}}"#,
        )]);
        let c = client(&url);
        let e = c.delete("security-group-rules/r").unwrap_err();
        assert_eq!(e.status(), Some(409));
        assert!(
            e.to_string()
                .ends_with("HTTP 409: Security group rule already exists."),
            "{e}"
        );
        assert_eq!(c.counts().retries, 0);
    }

    #[test]
    fn unreachable_servers_fail_after_every_attempt() {
        // Bind and drop: nothing listens on that port any more.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = client(&format!("http://127.0.0.1:{port}"));
        let e = c.get("ports").unwrap_err();
        assert!(matches!(e, ApiError::Transport { .. }), "{e}");
        assert_eq!(c.counts().retries, 2, "retried up to the attempts");
    }
}
