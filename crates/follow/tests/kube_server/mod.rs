//! A loopback stand-in for the Kubernetes API server: plain HTTP/1.1 on 127.0.0.1 that
//! answers list requests with JSON bodies and watch requests (`?watch=true`) with chunked
//! streams of watch events, one event per line, from a script of recorded responses.
//!
//! Shared by the follow crate's and the CLI's tests (the CLI includes this file by path). Uses
//! only std threads, so that tests without an async runtime can use it.

#![allow(dead_code)] // each including test uses a part

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a watch response ends after its events.
#[derive(Debug, Clone, Copy)]
pub enum End {
    /// The stream stays open and quiet (until the server is dropped).
    Hang,
    /// The server ends the response cleanly (the last chunk), as at `timeoutSeconds`.
    Close,
    /// The connection is cut inside a chunk: a dropped connection mid-stream.
    Cut,
}

/// One recorded response.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete response: status, content type, body.
    Body(u16, &'static str, String),
    /// `200` with a chunked stream of these lines.
    Watch(Vec<String>, End),
}

impl Reply {
    /// A JSON body with status 200.
    pub fn json(body: String) -> Reply {
        Reply::Body(200, "application/json", body)
    }

    /// A watch stream of the lines of `text` (JSON Lines, as recorded).
    pub fn watch(text: &str, end: End) -> Reply {
        Reply::Watch(
            text.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect(),
            end,
        )
    }

    /// What the API server answers for a group/version it does not serve.
    pub fn not_found() -> Reply {
        Reply::Body(
            404,
            "text/plain; charset=utf-8",
            "404 page not found\n".into(),
        )
    }
}

/// Reads `name` from the recorded responses in `tests/fixtures/kube/` of the follow crate.
pub fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../follow/tests/fixtures/kube")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[derive(Default)]
struct Script {
    /// Responses to lists, by path; the last one repeats.
    lists: HashMap<String, VecDeque<Reply>>,
    /// Responses to watches, by path; when none is left, the watch hangs.
    watches: HashMap<String, VecDeque<Reply>>,
}

/// The running server; dropping it stops its threads.
pub struct ApiServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    script: Arc<Mutex<Script>>,
    log: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl ApiServer {
    /// Starts a server with an empty script: every list is empty, every watch hangs.
    pub fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let server = ApiServer {
            url,
            script: Arc::default(),
            log: Arc::default(),
            stop: Arc::default(),
        };
        let (script, log, stop) = (
            server.script.clone(),
            server.log.clone(),
            server.stop.clone(),
        );
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (script, log, stop) = (script.clone(), log.clone(), stop.clone());
                        std::thread::spawn(move || serve(conn, &script, &log, &stop));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        server
    }

    /// Queues responses to lists of `path` (the last repeats).
    pub fn lists(&self, path: &str, replies: impl IntoIterator<Item = Reply>) -> &Self {
        let mut s = self.script.lock().expect("script");
        s.lists.entry(path.into()).or_default().extend(replies);
        self
    }

    /// Queues responses to watches of `path`.
    pub fn watches(&self, path: &str, replies: impl IntoIterator<Item = Reply>) -> &Self {
        let mut s = self.script.lock().expect("script");
        s.watches.entry(path.into()).or_default().extend(replies);
        self
    }

    /// Every request so far, as `path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    /// A kubeconfig whose current context points at this server.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: loopback\n  cluster:\n    server: {}\n\
             contexts:\n- name: loopback\n  context:\n    cluster: loopback\n    user: nobody\n\
             - name: elsewhere\n  context:\n    cluster: nowhere\n    user: nobody\n\
             current-context: loopback\nusers:\n- name: nobody\n  user: {{}}\n",
            self.url
        )
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Answers the requests of one connection (keep-alive) until it closes.
fn serve(conn: TcpStream, script: &Mutex<Script>, log: &Mutex<Vec<String>>, stop: &AtomicBool) {
    let Ok(read_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut conn = conn;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        // Skip the headers (GET requests have no body).
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" || header == "\n" {
                break;
            }
        }
        let target = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_string();
        log.lock().expect("log").push(target.clone());
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let watch = query
            .split('&')
            .any(|p| p == "watch=true" || p == "watch=1");
        let reply = {
            let mut s = script.lock().expect("script");
            if watch {
                s.watches.get_mut(path).and_then(VecDeque::pop_front)
            } else {
                s.lists.get_mut(path).and_then(|q| {
                    if q.len() > 1 {
                        q.pop_front()
                    } else {
                        q.front().cloned()
                    }
                })
            }
        };
        let reply = reply.unwrap_or_else(|| {
            if watch {
                Reply::Watch(Vec::new(), End::Hang)
            } else {
                Reply::json(
                    r#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}"#
                        .into(),
                )
            }
        });
        if !respond(&mut conn, reply, stop) {
            return;
        }
    }
}

/// Writes one response; false when the connection is done.
fn respond(conn: &mut TcpStream, reply: Reply, stop: &AtomicBool) -> bool {
    match reply {
        Reply::Body(status, content_type, body) => {
            let head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
                reason(status),
                body.len()
            );
            conn.write_all(head.as_bytes()).is_ok() && conn.write_all(body.as_bytes()).is_ok()
        }
        Reply::Watch(lines, end) => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                        Transfer-Encoding: chunked\r\n\r\n";
            if conn.write_all(head.as_bytes()).is_err() {
                return false;
            }
            for line in lines {
                let chunk = format!("{:x}\r\n{line}\n\r\n", line.len() + 1);
                if conn.write_all(chunk.as_bytes()).is_err() || conn.flush().is_err() {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            match end {
                End::Close => conn.write_all(b"0\r\n\r\n").is_ok(),
                End::Cut => {
                    // Announce a chunk, send half of it, and hang up.
                    let _ = conn.write_all(b"40\r\n{\"type\":\"MODIFIED\",\"obj");
                    let _ = conn.flush();
                    let _ = conn.shutdown(Shutdown::Both);
                    false
                }
                End::Hang => {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    false
                }
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        _ => "Status",
    }
}
