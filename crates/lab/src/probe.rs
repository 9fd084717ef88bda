//! What runs inside the pods: a TCP and UDP responder, a concurrent prober, and a long-lived
//! connection that reports when it stops working.

use std::fmt;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use palisade_model::Protocol;

use crate::LabError;

/// TCP connect timeout of a probe.
const TCP_TIMEOUT: Duration = Duration::from_millis(700);
/// UDP: wait per attempt, and attempts.
const UDP_WAIT: Duration = Duration::from_millis(250);
const UDP_ATTEMPTS: usize = 3;

/// Serves every `(port, protocol)` on each of `addresses` (none: the wildcard address):
/// TCP connections are echoed until closed, UDP datagrams echoed back (from the address they
/// came to only when bound to it). SCTP is not served (this kernel has none). Creates
/// `ready` once bound, then runs until killed.
pub fn serve(
    ports: &[(u16, Protocol)],
    addresses: &[IpAddr],
    ready: Option<&Path>,
) -> Result<(), LabError> {
    let wildcard = [IpAddr::from([0, 0, 0, 0])];
    let addresses = if addresses.is_empty() {
        &wildcard[..]
    } else {
        addresses
    };
    let mut handles = Vec::new();
    for (&(port, protocol), &ip) in ports
        .iter()
        .flat_map(|p| addresses.iter().map(move |a| (p, a)))
    {
        match protocol {
            Protocol::Tcp => {
                let l = bind_retrying(|| TcpListener::bind((ip, port)))?;
                handles.push(std::thread::spawn(move || {
                    for stream in l.incoming().flatten() {
                        std::thread::spawn(move || echo(stream));
                    }
                }));
            }
            Protocol::Udp => {
                let s = bind_retrying(|| UdpSocket::bind((ip, port)))?;
                handles.push(std::thread::spawn(move || {
                    let mut buf = [0u8; 1500];
                    while let Ok((n, from)) = s.recv_from(&mut buf) {
                        let _ = s.send_to(&buf[..n], from);
                    }
                }));
            }
            Protocol::Sctp => {}
        }
    }
    if let Some(r) = ready {
        std::fs::write(r, b"ready")?;
    }
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}

/// `bind()`, tried again for up to five seconds while the address is in use or not yet
/// there: a responder killed to be restarted frees its ports only when its last thread has
/// exited, which can be after it left the namespace's process list.
fn bind_retrying<T>(bind: impl Fn() -> std::io::Result<T>) -> std::io::Result<T> {
    use std::io::ErrorKind::{AddrInUse, AddrNotAvailable};
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match bind() {
            Err(e)
                if matches!(e.kind(), AddrInUse | AddrNotAvailable)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            bound => return bound,
        }
    }
}

fn echo(mut s: TcpStream) {
    let mut buf = [0u8; 512];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 || s.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// A probe target: address, port, protocol (`10.0.0.1:80/TCP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target {
    /// Address.
    pub ip: IpAddr,
    /// Port.
    pub port: u16,
    /// Protocol.
    pub protocol: Protocol,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}",
            SocketAddr::new(self.ip, self.port),
            self.protocol
        )
    }
}

impl FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, proto) = s
            .rsplit_once('/')
            .ok_or_else(|| format!("{s:?}: want ADDR:PORT/PROTOCOL"))?;
        let addr: SocketAddr = addr.parse().map_err(|e| format!("{s:?}: {e}"))?;
        Ok(Target {
            ip: addr.ip(),
            port: addr.port(),
            protocol: proto.parse()?,
        })
    }
}

/// One probe's outcome, with when it ran (microseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeResult {
    /// What was probed.
    pub target: Target,
    /// Whether the connection got through (an answer, or a refusal from the destination).
    pub reached: bool,
    /// Start.
    pub start_us: u128,
    /// End.
    pub end_us: u128,
}

impl ProbeResult {
    /// Reads a line of `probe-batch` output.
    pub fn parse(line: &str) -> Option<ProbeResult> {
        let mut w = line.split_whitespace();
        Some(ProbeResult {
            target: w.next()?.parse().ok()?,
            reached: w.next()? == "1",
            start_us: w.next()?.parse().ok()?,
            end_us: w.next()?.parse().ok()?,
        })
    }
}

impl fmt::Display for ProbeResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {}",
            self.target,
            u8::from(self.reached),
            self.start_us,
            self.end_us
        )
    }
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// Probes every target concurrently from the current network namespace.
pub fn probe_batch(targets: &[Target]) -> Vec<ProbeResult> {
    let handles: Vec<_> = targets
        .iter()
        .map(|&t| {
            std::thread::spawn(move || {
                let start_us = now_us();
                let reached = match t.protocol {
                    Protocol::Tcp => probe_tcp(t),
                    Protocol::Udp => probe_udp(t),
                    Protocol::Sctp => false,
                };
                ProbeResult {
                    target: t,
                    reached,
                    start_us,
                    end_us: now_us(),
                }
            })
        })
        .collect();
    handles.into_iter().filter_map(|h| h.join().ok()).collect()
}

fn probe_tcp(t: Target) -> bool {
    match TcpStream::connect_timeout(&SocketAddr::new(t.ip, t.port), TCP_TIMEOUT) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
    }
}

fn probe_udp(t: Target) -> bool {
    let Ok(s) = UdpSocket::bind(if t.ip.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }) else {
        return false;
    };
    if s.connect(SocketAddr::new(t.ip, t.port)).is_err()
        || s.set_read_timeout(Some(UDP_WAIT)).is_err()
    {
        return false;
    }
    let mut buf = [0u8; 64];
    for _ in 0..UDP_ATTEMPTS {
        if s.send(b"palisade").is_err() {
            return false;
        }
        match s.recv(&mut buf) {
            Ok(_) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return true,
            Err(_) => {}
        }
    }
    false
}

/// Keeps one TCP connection to `to` and exchanges a byte every `interval` for `duration`,
/// printing `ok <unix ms>` or `fail <unix ms>` per exchange; returns when done.
pub fn hold(
    to: SocketAddr,
    duration: Duration,
    interval: Duration,
    out: &mut impl Write,
) -> Result<(), LabError> {
    let mut s = TcpStream::connect_timeout(&to, TCP_TIMEOUT)?;
    s.set_read_timeout(Some(interval.max(Duration::from_millis(100))))?;
    let end = Instant::now() + duration;
    let mut buf = [0u8; 1];
    while Instant::now() < end {
        let ok = s.write_all(b"x").is_ok() && matches!(s.read(&mut buf), Ok(1));
        writeln!(
            out,
            "{} {}",
            if ok { "ok" } else { "fail" },
            now_us() / 1000
        )?;
        out.flush()?;
        std::thread::sleep(interval);
    }
    Ok(())
}

/// New-connection latency towards `to` for `duration`, one connection at a time (each
/// connect is a new conntrack entry, so it walks the ruleset).
pub fn connect_bench(to: SocketAddr, duration: Duration) -> Result<ConnectStats, LabError> {
    let end = Instant::now() + duration;
    let mut samples = Vec::new();
    let mut timeouts = 0;
    while Instant::now() < end {
        let t = Instant::now();
        match TcpStream::connect_timeout(&to, Duration::from_millis(200)) {
            Ok(s) => {
                samples.push(t.elapsed().as_micros());
                drop(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut && timeouts < 1000 => timeouts += 1,
            Err(e) => return Err(e.into()),
        }
    }
    samples.sort_unstable();
    let pct = |q: f64| {
        samples
            .get(((samples.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let mean = samples.iter().sum::<u128>() / samples.len().max(1) as u128;
    Ok(ConnectStats {
        connections: samples.len(),
        timeouts,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        mean_us: mean,
    })
}

impl fmt::Display for ConnectStats {
    /// `connections N timeouts N per_second N p50_us N p99_us N`, where `per_second` is
    /// connects per second of connect time (timeouts are lost SYNs, counted apart).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rate = 1e6 / self.mean_us.max(1) as f64;
        write!(
            f,
            "connections {} timeouts {} per_second {rate:.0} p50_us {} p99_us {}",
            self.connections, self.timeouts, self.p50_us, self.p99_us
        )
    }
}

/// What [`connect_bench`] measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectStats {
    /// Connections established.
    pub connections: usize,
    /// Connects that timed out (lost SYNs; they also happen with no ruleset loaded).
    pub timeouts: usize,
    /// Median connect time.
    pub p50_us: u128,
    /// 99th percentile connect time.
    pub p99_us: u128,
    /// Mean connect time of established connections.
    pub mean_us: u128,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

    use super::*;

    /// A port still held when the bind starts is bound once its holder lets it go (a
    /// single bind fails with the address in use).
    #[test]
    fn a_bind_waits_for_a_port_its_holder_frees() {
        let held = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        assert_eq!(
            TcpListener::bind(("127.0.0.1", port)).unwrap_err().kind(),
            std::io::ErrorKind::AddrInUse
        );
        let freer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(held);
        });
        let bound = bind_retrying(|| TcpListener::bind(("127.0.0.1", port))).unwrap();
        assert_eq!(bound.local_addr().unwrap().port(), port);
        freer.join().unwrap();
    }
}
