//! The processes the lab starts inside pod namespaces: a responder, a prober, a held
//! connection, a connect benchmark and a DNS lookup followed by a connection.
//!
//! A lab re-executes a program as `<exe> lab <helper> ARGS...` under `ip netns exec`; that
//! program hands its arguments to [`run_if_helper`]. [`Helper`] is the one definition of
//! those arguments: [`Helper::args`] writes them and [`Helper::parse`] reads them back, so
//! the `palisade` binary, the lab's own helper binary and anything else that hosts the
//! helpers agree by construction.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use palisade_model::Protocol;

use crate::LabError;
use crate::lookup::{DEFAULT_CONNECT_TIMEOUT, LookupRequest};
use crate::probe::{Target, connect_bench, hold, probe_batch, serve};

/// The first argument of every helper command line (`<exe> lab <helper> ...`).
pub const PREFIX: &str = "lab";

/// Interval between the exchanges of a held connection.
const HOLD_INTERVAL: Duration = Duration::from_millis(50);

/// One helper command, as started inside a pod namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Helper {
    /// `serve --ports 80/TCP,81/UDP [--addresses IP,IP] [--ready-file PATH]`: TCP and UDP
    /// echo on the ports, of the addresses or of the wildcard address; creates the ready
    /// file once listening, then runs until killed.
    Serve {
        /// Ports and protocols to serve.
        ports: Vec<(u16, Protocol)>,
        /// The addresses to bind; empty: the wildcard address.
        addresses: Vec<IpAddr>,
        /// File to create once every port is bound.
        ready_file: Option<PathBuf>,
    },
    /// `probe-batch ADDR:PORT/PROTOCOL...`: probes the targets concurrently and prints one
    /// [`ProbeResult`](crate::ProbeResult) line per target.
    ProbeBatch {
        /// What to probe.
        targets: Vec<Target>,
    },
    /// `hold --to ADDR:PORT --millis N`: keeps one TCP connection, exchanges a byte every
    /// 50 ms and prints `ok <unix ms>` or `fail <unix ms>` per exchange.
    Hold {
        /// The responder to connect to.
        to: SocketAddr,
        /// How long to hold the connection.
        duration: Duration,
    },
    /// `connect-bench --to ADDR:PORT --millis N`: new-connection latency, printed as one
    /// [`ConnectStats`](crate::ConnectStats) line.
    ConnectBench {
        /// The responder to connect to.
        to: SocketAddr,
        /// How long to measure.
        duration: Duration,
    },
    /// `lookup --server ADDR:PORT --name NAME --type A|AAAA [--connect PORT/PROTOCOL]
    /// [--timeout-ms N]`: one DNS query (one retry), then at once a connection to the first
    /// address; prints one [`LookupReport`](crate::LookupReport) line.
    Lookup(LookupRequest),
}

impl Helper {
    /// The helper's name, its first argument after [`PREFIX`].
    pub fn name(&self) -> &'static str {
        match self {
            Helper::Serve { .. } => "serve",
            Helper::ProbeBatch { .. } => "probe-batch",
            Helper::Hold { .. } => "hold",
            Helper::ConnectBench { .. } => "connect-bench",
            Helper::Lookup(_) => "lookup",
        }
    }

    /// The arguments that start this helper, after [`PREFIX`]: the name first.
    pub fn args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![self.name().into()];
        match self {
            Helper::Serve {
                ports,
                addresses,
                ready_file,
            } => {
                let spec: Vec<String> = ports.iter().map(|(n, p)| format!("{n}/{p}")).collect();
                out.extend(["--ports".into(), spec.join(",").into()]);
                if !addresses.is_empty() {
                    let ips: Vec<String> = addresses.iter().map(IpAddr::to_string).collect();
                    out.extend(["--addresses".into(), ips.join(",").into()]);
                }
                if let Some(path) = ready_file {
                    out.extend(["--ready-file".into(), path.clone().into_os_string()]);
                }
            }
            Helper::ProbeBatch { targets } => {
                out.extend(targets.iter().map(|t| t.to_string().into()));
            }
            Helper::Hold { to, duration } | Helper::ConnectBench { to, duration } => {
                out.extend([
                    "--to".into(),
                    to.to_string().into(),
                    "--millis".into(),
                    duration.as_millis().to_string().into(),
                ]);
            }
            Helper::Lookup(r) => {
                out.extend([
                    "--server".into(),
                    r.server.to_string().into(),
                    "--name".into(),
                    r.name.clone().into(),
                    "--type".into(),
                    r.record_type.to_string().into(),
                ]);
                if let Some((port, protocol)) = r.connect {
                    out.extend(["--connect".into(), format!("{port}/{protocol}").into()]);
                }
                out.extend([
                    "--timeout-ms".into(),
                    r.connect_timeout.as_millis().to_string().into(),
                ]);
            }
        }
        out
    }

    /// Reads the arguments [`Helper::args`] wrote (the name first).
    pub fn parse<I, S>(args: I) -> Result<Helper, LabError>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
        let (name, rest) = args.split_first().ok_or_else(|| {
            usage("a helper name (serve, probe-batch, hold, connect-bench, lookup)")
        })?;
        let name = text(name)?;
        match name {
            "serve" => {
                let flags = Flags::parse(rest, &["--ports", "--addresses", "--ready-file"])?;
                let ports = match flags.get("--ports") {
                    Some(spec) => parse_ports(text(spec)?)?,
                    None => Vec::new(),
                };
                let addresses = match flags.get("--addresses") {
                    Some(spec) => text(spec)?
                        .split(',')
                        .map(|a| {
                            a.parse()
                                .map_err(|e| usage(&format!("--addresses IP,IP ({a:?}: {e})")))
                        })
                        .collect::<Result<_, _>>()?,
                    None => Vec::new(),
                };
                let ready_file = flags.get("--ready-file").map(PathBuf::from);
                Ok(Helper::Serve {
                    ports,
                    addresses,
                    ready_file,
                })
            }
            "probe-batch" => {
                let targets = rest
                    .iter()
                    .map(|t| text(t)?.parse().map_err(LabError::Usage))
                    .collect::<Result<_, _>>()?;
                Ok(Helper::ProbeBatch { targets })
            }
            "hold" | "connect-bench" => {
                let flags = Flags::parse(rest, &["--to", "--millis"])?;
                let to = flags.required("--to")?;
                let to: SocketAddr = text(to)?
                    .parse()
                    .map_err(|e| usage(&format!("--to ADDR:PORT ({e})")))?;
                let millis: u64 = text(flags.required("--millis")?)?
                    .parse()
                    .map_err(|e| usage(&format!("--millis N ({e})")))?;
                let duration = Duration::from_millis(millis);
                Ok(if name == "hold" {
                    Helper::Hold { to, duration }
                } else {
                    Helper::ConnectBench { to, duration }
                })
            }
            "lookup" => parse_lookup(rest).map(Helper::Lookup),
            other => Err(LabError::Usage(format!(
                "unknown lab helper {other:?} (serve, probe-batch, hold, connect-bench, lookup)"
            ))),
        }
    }

    /// `ip netns exec <netns> <exe> lab <args>`: the command that starts this helper inside
    /// a namespace.
    pub fn command(&self, exe: &Path, netns: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", netns])
            .arg(exe)
            .arg(PREFIX)
            .args(self.args());
        c
    }

    /// Runs the helper in the current process, writing its report to `out`.
    pub fn run(&self, out: &mut impl Write) -> Result<(), LabError> {
        match self {
            Helper::Serve {
                ports,
                addresses,
                ready_file,
            } => serve(ports, addresses, ready_file.as_deref()),
            Helper::ProbeBatch { targets } => {
                for r in probe_batch(targets) {
                    writeln!(out, "{r}")?;
                }
                Ok(())
            }
            Helper::Hold { to, duration } => hold(*to, *duration, HOLD_INTERVAL, out),
            Helper::ConnectBench { to, duration } => {
                writeln!(out, "{}", connect_bench(*to, *duration)?)?;
                Ok(())
            }
            Helper::Lookup(request) => {
                let report = crate::lookup::run(request)?;
                let line = serde_json::to_string(&report)
                    .map_err(|e| LabError::Usage(format!("lookup report: {e}")))?;
                writeln!(out, "{line}")?;
                Ok(())
            }
        }
    }
}

/// When `args` (a whole command line, program name first) start a helper
/// (`<exe> lab <helper> ...`), runs it and returns the exit status; otherwise `None`.
/// A program that hosts the helpers calls this first thing in `main`.
pub fn run_if_helper<I, S>(args: I) -> Option<ExitCode>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    if args.get(1).map(OsString::as_os_str) != Some(OsStr::new(PREFIX)) {
        return None;
    }
    let result =
        Helper::parse(args.into_iter().skip(2)).and_then(|h| h.run(&mut std::io::stdout().lock()));
    Some(match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lab helper: {e}");
            ExitCode::from(2)
        }
    })
}

fn usage(want: &str) -> LabError {
    LabError::Usage(format!("lab helper: want {want}"))
}

fn text(s: &OsStr) -> Result<&str, LabError> {
    s.to_str()
        .ok_or_else(|| LabError::Usage(format!("{s:?} is not UTF-8")))
}

/// The arguments of the lookup helper.
fn parse_lookup(rest: &[OsString]) -> Result<LookupRequest, LabError> {
    let flags = Flags::parse(
        rest,
        &["--server", "--name", "--type", "--connect", "--timeout-ms"],
    )?;
    let server = text(flags.required("--server")?)?
        .parse()
        .map_err(|e| usage(&format!("--server ADDR:PORT ({e})")))?;
    let name = text(flags.required("--name")?)?.to_string();
    let record_type = text(flags.required("--type")?)?
        .parse()
        .map_err(|e: String| usage(&format!("--type ({e})")))?;
    let connect = match flags.get("--connect") {
        Some(spec) => match parse_ports(text(spec)?)?.as_slice() {
            [one] => Some(*one),
            _ => return Err(usage("--connect PORT/PROTOCOL (one)")),
        },
        None => None,
    };
    let connect_timeout = match flags.get("--timeout-ms") {
        Some(ms) => Duration::from_millis(
            text(ms)?
                .parse()
                .map_err(|e| usage(&format!("--timeout-ms N ({e})")))?,
        ),
        None => DEFAULT_CONNECT_TIMEOUT,
    };
    Ok(LookupRequest {
        server,
        name,
        record_type,
        connect,
        connect_timeout,
    })
}

/// `80/TCP,81/UDP`.
fn parse_ports(spec: &str) -> Result<Vec<(u16, Protocol)>, LabError> {
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            let bad = || usage(&format!("PORT/PROTOCOL, not {s:?}"));
            let (n, p) = s.split_once('/').ok_or_else(bad)?;
            Ok((n.parse().map_err(|_| bad())?, p.parse().map_err(|_| bad())?))
        })
        .collect()
}

/// `--flag value` pairs, each flag at most once and from a known list.
struct Flags<'a>(Vec<(&'static str, &'a OsStr)>);

impl<'a> Flags<'a> {
    fn parse(args: &'a [OsString], known: &[&'static str]) -> Result<Flags<'a>, LabError> {
        let mut out = Vec::new();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let flag = text(flag)?;
            let Some(&flag) = known.iter().find(|k| **k == flag) else {
                return Err(usage(&format!("one of {known:?}, not {flag:?}")));
            };
            let value = it.next().ok_or_else(|| usage(&format!("{flag} VALUE")))?;
            if out.iter().any(|(f, _)| *f == flag) {
                return Err(usage(&format!("{flag} once")));
            }
            out.push((flag, value.as_os_str()));
        }
        Ok(Flags(out))
    }

    fn get(&self, flag: &str) -> Option<&'a OsStr> {
        self.0.iter().find(|(f, _)| *f == flag).map(|(_, v)| *v)
    }

    fn required(&self, flag: &str) -> Result<&'a OsStr, LabError> {
        self.get(flag)
            .ok_or_else(|| usage(&format!("{flag} VALUE")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(h: Helper) {
        assert_eq!(Helper::parse(h.args()).ok(), Some(h.clone()), "{h:?}");
    }

    #[test]
    fn every_helper_reads_back_what_it_writes() {
        round_trip(Helper::Serve {
            ports: vec![(80, Protocol::Tcp), (81, Protocol::Udp)],
            addresses: vec![],
            ready_file: Some(PathBuf::from("/run/x/ready")),
        });
        round_trip(Helper::Serve {
            ports: vec![(80, Protocol::Tcp)],
            addresses: vec![
                "192.0.2.10".parse().expect("an address"),
                "192.0.2.20".parse().expect("an address"),
            ],
            ready_file: None,
        });
        round_trip(Helper::ProbeBatch {
            targets: vec![
                "10.0.0.1:80/TCP".parse().expect("valid target"),
                "[2001:db8::1]:81/UDP".parse().expect("valid target"),
            ],
        });
        round_trip(Helper::ProbeBatch { targets: vec![] });
        let to: SocketAddr = "10.0.1.11:80".parse().expect("valid address");
        round_trip(Helper::Hold {
            to,
            duration: Duration::from_millis(3000),
        });
        round_trip(Helper::ConnectBench {
            to,
            duration: Duration::from_millis(1500),
        });
        let server: SocketAddr = "192.0.2.10:53".parse().expect("valid address");
        round_trip(Helper::Lookup(LookupRequest {
            server,
            name: "allowed.example.org".into(),
            record_type: crate::RecordType::A,
            connect: Some((80, Protocol::Tcp)),
            connect_timeout: Duration::from_millis(150),
        }));
        round_trip(Helper::Lookup(LookupRequest {
            server,
            name: "v6.example.org".into(),
            record_type: crate::RecordType::Aaaa,
            connect: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }));
    }

    #[test]
    fn a_lookup_without_a_timeout_connects_within_300_ms() {
        let args = [
            "lookup",
            "--server",
            "192.0.2.10:53",
            "--name",
            "a.example",
            "--type",
            "A",
            "--connect",
            "80/UDP",
        ];
        match Helper::parse(args) {
            Ok(Helper::Lookup(r)) => {
                assert_eq!(r.connect_timeout, Duration::from_millis(300));
                assert_eq!(r.connect, Some((80, Protocol::Udp)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for (args, why) in [
            (&[][..], "no helper name"),
            (&["upp"][..], "unknown helper"),
            (&["serve", "--ports", "80"][..], "port without protocol"),
            (
                &["serve", "--ports", "80/tcp"][..],
                "protocol spelled wrong",
            ),
            (&["serve", "--port", "80/TCP"][..], "unknown flag"),
            (&["serve", "--ports"][..], "flag without value"),
            (
                &["serve", "--ports", "80/TCP", "--addresses", "192.0.2.10,x"][..],
                "an address that is none",
            ),
            (&["probe-batch", "10.0.0.1/TCP"][..], "target without port"),
            (&["hold", "--to", "10.0.0.1:80"][..], "no --millis"),
            (
                &["lookup", "--server", "192.0.2.10:53", "--name", "a"][..],
                "lookup without --type",
            ),
            (
                &[
                    "lookup",
                    "--server",
                    "192.0.2.10",
                    "--name",
                    "a",
                    "--type",
                    "A",
                ][..],
                "server without port",
            ),
            (
                &[
                    "lookup",
                    "--server",
                    "192.0.2.10:53",
                    "--name",
                    "a",
                    "--type",
                    "MX",
                ][..],
                "record type other than A or AAAA",
            ),
            (
                &[
                    "lookup",
                    "--server",
                    "192.0.2.10:53",
                    "--name",
                    "a",
                    "--type",
                    "A",
                    "--connect",
                    "80/TCP,81/TCP",
                ][..],
                "two connect targets",
            ),
            (
                &[
                    "hold",
                    "--to",
                    "10.0.0.1:80",
                    "--millis",
                    "1",
                    "--millis",
                    "2",
                ][..],
                "flag twice",
            ),
        ] {
            assert!(
                matches!(Helper::parse(args.iter().copied()), Err(LabError::Usage(_))),
                "{why}: {args:?}"
            );
        }
    }

    #[test]
    fn only_lab_command_lines_are_helpers() {
        assert!(run_if_helper(["exe", "--nocapture"]).is_none());
        assert!(run_if_helper(["exe"]).is_none());
        assert_eq!(
            run_if_helper(["exe", "lab", "nonsense"]),
            Some(ExitCode::from(2))
        );
    }
}
