//! A real DNS server outside the cluster: Debian's `dnsmasq` (package `dnsmasq-base`) in a
//! lab namespace, answering only the A and AAAA records it is given, with a given TTL.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::lookup::{LookupRequest, RecordType, lookup};
use crate::{LabError, net};

/// The names a [`DnsServer`] answers for, each with its addresses (IPv4 as A, IPv6 as
/// AAAA records).
pub type DnsRecords = BTreeMap<String, Vec<IpAddr>>;

/// How long the server may take to answer as told, after starting or after new records.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// Distinguishes the scratch directories of the servers of one process.
static SERVERS: AtomicU32 = AtomicU32::new(0);

/// A running `dnsmasq` on port 53 of one address in a namespace; stopped when dropped.
#[derive(Debug)]
pub struct DnsServer {
    netns: String,
    addr: SocketAddr,
    exe: PathBuf,
    dir: PathBuf,
    child: Child,
}

impl DnsServer {
    /// The `dnsmasq` program: on `PATH`, else in `/usr/sbin` or `/sbin` (Debian's place).
    pub fn program() -> Result<PathBuf, LabError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
            .map(|d| d.join("dnsmasq"))
            .find(|p| p.is_file())
            .ok_or_else(|| LabError::Command {
                command: "dnsmasq".into(),
                message: "not found on PATH, in /usr/sbin or /sbin (Debian package dnsmasq-base)"
                    .into(),
            })
    }

    /// Starts `dnsmasq` in namespace `netns` on `ip` port 53, answering `records` with TTL
    /// `ttl` seconds, and waits until it answers them. `exe` hosts the lab's helpers; its
    /// lookup helper, run in `netns`, is how the server is asked.
    pub fn start(
        exe: &Path,
        netns: &str,
        ip: IpAddr,
        records: &DnsRecords,
        ttl: u32,
    ) -> Result<DnsServer, LabError> {
        let program = Self::program()?;
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("palisade-dns-{}-{n}-{netns}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        write_hosts(&dir, records)?;
        let stderr = File::create(dir.join("stderr"))?;
        let child = Command::new("ip")
            .args(["netns", "exec", netns])
            .arg(program)
            .args(flags(&dir, ip, ttl))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()?;
        let mut server = DnsServer {
            netns: netns.to_string(),
            addr: SocketAddr::new(ip, 53),
            exe: exe.to_path_buf(),
            dir,
            child,
        };
        server.wait_for(records)?;
        Ok(server)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers `records` from now on: rewrites the hosts file, makes `dnsmasq` read it again
    /// (SIGHUP, which also empties its cache) and waits until a query returns the new
    /// answers.
    pub fn set_records(&mut self, records: &DnsRecords) -> Result<(), LabError> {
        write_hosts(&self.dir, records)?;
        net::run(&["kill", "-HUP", &self.child.id().to_string()])?;
        self.wait_for(records)
    }

    /// What `dnsmasq` logged (every query and answer), for a failing test's message.
    pub fn log(&self) -> String {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        format!("{}{}", read("stderr"), read("log"))
    }

    /// Waits until every name of `records` is answered with exactly its addresses.
    fn wait_for(&mut self, records: &DnsRecords) -> Result<(), LabError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(LabError::Command {
                    command: format!("dnsmasq in {}", self.netns),
                    message: format!("exited ({status}): {}", self.log().trim()),
                });
            }
            if self.answers(records)? {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(LabError::Timeout(format!(
                    "dnsmasq at {} in {} did not answer {records:?} within {READY_TIMEOUT:?}: {}",
                    self.addr,
                    self.netns,
                    self.log().trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers every name of `records` with exactly its addresses (a
    /// server that is not yet listening answers nothing).
    fn answers(&self, records: &DnsRecords) -> Result<bool, LabError> {
        for (name, ips) in records {
            for (record_type, want_v4) in [(RecordType::A, true), (RecordType::Aaaa, false)] {
                let mut want: Vec<IpAddr> = ips
                    .iter()
                    .copied()
                    .filter(|ip| ip.is_ipv4() == want_v4)
                    .collect();
                if want.is_empty() {
                    continue;
                }
                let request = LookupRequest {
                    server: self.addr,
                    name: name.clone(),
                    record_type,
                    connect: None,
                    connect_timeout: Duration::ZERO,
                };
                let report = lookup(&self.exe, &self.netns, &request)?;
                let mut got: Vec<IpAddr> = report.answers.iter().map(|a| a.ip).collect();
                want.sort();
                got.sort();
                if got != want {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The command line: only the given records (no `/etc/hosts`, no upstream servers, no
/// configuration file), on `ip` port 53 only, in the foreground, every query logged.
fn flags(dir: &Path, ip: IpAddr, ttl: u32) -> Vec<String> {
    let path = |f: &str| dir.join(f).display().to_string();
    vec![
        "--conf-file=/dev/null".into(),
        "--keep-in-foreground".into(),
        "--no-resolv".into(),
        "--no-hosts".into(),
        format!("--addn-hosts={}", path("hosts")),
        format!("--local-ttl={ttl}"),
        format!("--listen-address={ip}"),
        "--bind-interfaces".into(),
        "--port=53".into(),
        format!("--pid-file={}", path("pid")),
        format!("--log-facility={}", path("log")),
        "--log-queries".into(),
    ]
}

/// Writes the records as a hosts file, one `ADDRESS NAME` line per address, atomically (a
/// reload never reads half a file).
fn write_hosts(dir: &Path, records: &DnsRecords) -> Result<(), LabError> {
    let mut text = String::new();
    for (name, ips) in records {
        for ip in ips {
            text.push_str(&format!("{ip} {name}\n"));
        }
    }
    let tmp = dir.join("hosts.new");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join("hosts"))?;
    Ok(())
}
