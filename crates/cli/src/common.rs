//! Arguments shared by the analysis commands, and turning them into library inputs.

use std::net::IpAddr;
use std::path::PathBuf;

use palisade_analysis::Analysis;
use palisade_engine::{Endpoint, Engine, Options, Semantics};
use palisade_follow::source::{Content, Text, kube};
use palisade_model::{DnsMap, LoadOptions, PortRange, Protocol, Severity};

use crate::error::CliError;
use crate::report::ports::{self, PortArg};

/// Where the cluster and policies come from, and how to read them.
#[derive(Debug, Clone, clap::Args)]
pub struct Input {
    /// Manifest files or directories (recursively *.yaml, *.yml, *.json); `-` for stdin.
    #[arg(
        short = 'f',
        long = "filename",
        num_args = 1..,
        required_unless_present_any = ["kube", "kubeconfig", "context"],
        conflicts_with_all = ["kube", "kubeconfig", "context"]
    )]
    pub files: Vec<PathBuf>,
    /// Read the cluster's objects from the Kubernetes API (the kubeconfig's current
    /// context, or the pod's service account) instead of files.
    #[arg(long)]
    pub kube: bool,
    /// The kubeconfig file to read the cluster with (implies `--kube`; default:
    /// `KUBECONFIG`, else `~/.kube/config`).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to read the cluster with (implies `--kube`; default: the
    /// kubeconfig's current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Skip invalid objects (reporting them) instead of refusing the whole input.
    #[arg(long)]
    pub skip_invalid: bool,
    /// NetworkPolicy isolation model: `standard` (released Kubernetes) or `legacy` (the
    /// original v1beta1 model, where only DefaultDeny namespaces are isolated).
    #[arg(long, value_enum, default_value = "standard")]
    pub semantics: SemanticsArg,
    /// Do not exempt traffic from a node's host address to the pods on that node.
    #[arg(long)]
    pub no_node_local: bool,
    /// List every object behind a summary notice (skipped kinds, pods without an address).
    #[arg(short, long)]
    pub verbose: bool,
    /// A DNS map for ClusterNetworkPolicy `domainNames` peers: a hosts-style file (`ADDRESS
    /// NAME…` per line) or YAML (`NAME: [ADDRESS, …]`). Without one, such peers match
    /// nothing (they fail closed).
    #[arg(long, value_name = "FILE")]
    pub dns: Option<PathBuf>,
}

/// `--semantics` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SemanticsArg {
    /// Released Kubernetes.
    Standard,
    /// The original v1beta1 proposal.
    Legacy,
}

impl Input {
    /// Whether the input is a live cluster.
    pub fn is_kube(&self) -> bool {
        self.kube || self.kubeconfig.is_some() || self.context.is_some()
    }

    /// The input's named texts: each file's, or each live object's (named
    /// `kube:<Kind>/<namespace>/<name>`, so invalid objects are reported as for files, with
    /// that name in place of the file), held as it came ([`Content::Object`] for an object).
    pub fn bodies(&self) -> Result<Vec<Text>, CliError> {
        if !self.is_kube() {
            let texts = palisade_model::read_paths(&self.files)?;
            return Ok(texts
                .into_iter()
                .map(|(id, text)| Text {
                    id,
                    body: Content::Text(text),
                })
                .collect());
        }
        let snapshot =
            kube::snapshot_blocking(self.kubeconfig.as_deref(), self.context.as_deref())?;
        for kind in &snapshot.missing {
            eprintln!("notice: the cluster does not serve {kind} (its CRD is not installed)");
        }
        Ok(snapshot.texts)
    }

    /// [`Input::bodies`] as texts, a live object's as its JSON (for `lint`, which reads
    /// the texts' line maps).
    pub fn texts(&self) -> Result<Vec<(String, String)>, CliError> {
        let bodies = self.bodies()?;
        Ok(bodies
            .into_iter()
            .map(|t| match t.body {
                Content::Text(text) => (t.id, text),
                Content::Object(value) => (t.id, value.to_string()),
            })
            .collect())
    }

    /// Loads and compiles the input, printing notices on stderr.
    pub fn engine(&self) -> Result<Engine, CliError> {
        let options = LoadOptions {
            skip_invalid: self.skip_invalid,
            field_lines: false,
        };
        let loaded = if self.is_kube() {
            let mut bodies = self.bodies()?;
            palisade_model::load_bodies(
                (bodies.iter_mut()).map(|t| (t.id.as_str(), t.body.take_body())),
                options,
            )?
        } else {
            palisade_model::load_paths(&self.files, options)?
        };
        self.engine_of(loaded)
    }

    /// Loads named texts (each name standing for its file in diagnostics) with the loading
    /// options of the flags, printing notices on stderr.
    pub fn engine_of_texts(&self, texts: &[(String, String)]) -> Result<Engine, CliError> {
        let options = LoadOptions {
            skip_invalid: self.skip_invalid,
            field_lines: false,
        };
        let loaded = palisade_model::load_sources(
            texts.iter().map(|(n, t)| (n.as_str(), t.as_str())),
            options,
        )?;
        self.engine_of(loaded)
    }

    /// The DNS map of `--dns`, if given.
    pub fn dns_map(&self) -> Result<Option<DnsMap>, CliError> {
        let Some(path) = &self.dns else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|source| CliError::File {
            path: path.clone(),
            source,
        })?;
        DnsMap::parse(&path.display().to_string(), &text)
            .map(Some)
            .map_err(CliError::Invalid)
    }

    /// Reports what loading noticed and compiles the loaded cluster (with the DNS map).
    fn engine_of(&self, mut loaded: palisade_model::Loaded) -> Result<Engine, CliError> {
        loaded.cluster.dns = self.dns_map()?.map(std::sync::Arc::new);
        if loaded.cluster.dns.is_none() {
            for p in loaded
                .cluster
                .admin_policies
                .iter()
                .filter(|p| has_domain_names(p))
            {
                once(&format!(
                    "{}:{}: notice: {} {}: its domainNames peers match nothing without a DNS map (--dns FILE); they fail closed (the node agent learns their addresses with --dns-resolver)",
                    p.origin.file,
                    p.origin.line,
                    p.kind.as_str(),
                    p.name
                ));
            }
        }
        for d in &loaded.diagnostics {
            let prefix = if d.severity == Severity::Error {
                "skipped: "
            } else {
                ""
            };
            once(&format!("{prefix}{d}"));
        }
        if self.verbose {
            for d in &loaded.details {
                eprintln!("{d}");
            }
        }
        Ok(Engine::new(loaded.cluster, self.options()))
    }

    /// The evaluator options the flags give.
    pub fn options(&self) -> Options {
        Options {
            semantics: match self.semantics {
                SemanticsArg::Standard => Semantics::Standard,
                SemanticsArg::Legacy => Semantics::Legacy,
            },
            allow_node_local: !self.no_node_local,
        }
    }
}

/// Whether a policy has a `domainNames` peer.
fn has_domain_names(p: &palisade_model::AdminPolicy) -> bool {
    (p.ingress.iter().chain(&p.egress))
        .flat_map(|r| &r.peers)
        .any(|peer| matches!(peer, palisade_model::AdminPeer::DomainNames(_)))
}

/// Prints a message on stderr unless this run printed it already: a command that loads
/// the same files twice (`diff`) says each thing once.
pub fn once(message: &str) {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let first = seen
        .lock()
        .map_or(true, |mut s| s.insert(message.to_string()));
    if first {
        eprintln!("{message}");
    }
}

/// The evaluator with the input's staged policies enforced too, when it has any.
pub fn staged_engine(engine: &Engine) -> Option<Engine> {
    let cluster = engine.cluster();
    (!cluster.staged.is_empty()).then(|| Engine::new(cluster.with_staged(), engine.options()))
}

/// What the staged policies would decide for `flow`, when it differs from `enforced`.
pub fn staged_difference(
    staged: Option<&Engine>,
    flow: &palisade_engine::Flow,
    enforced: &palisade_engine::Verdict,
) -> Option<palisade_engine::Verdict> {
    let v = staged?.evaluate(flow);
    (v.allowed != enforced.allowed).then_some(v)
}

/// Parses a protocol name, case-insensitively.
pub fn parse_protocol(s: &str) -> Result<Protocol, String> {
    s.to_ascii_uppercase().parse()
}

/// Resolves `namespace/pod` or an IP address to an endpoint.
pub fn endpoint(
    engine: &Engine,
    spec: &str,
    family_v6: Option<bool>,
) -> Result<Endpoint, CliError> {
    if let Ok(ip) = spec.parse::<IpAddr>() {
        return Ok(engine.endpoint_for_ip(ip));
    }
    let Some((ns, name)) = spec.split_once('/') else {
        return domain_endpoint(engine, spec, family_v6);
    };
    let pod = engine
        .pod_id(ns, name)
        .ok_or_else(|| CliError::Usage(format!("no pod {spec} in the input")))?;
    engine.endpoint_for_pod(pod, family_v6).ok_or_else(|| {
        CliError::Usage(format!(
            "pod {spec} has no IP address (status.podIP/podIPs) to connect with"
        ))
    })
}

/// An endpoint with its name.
pub fn named(engine: &Engine, e: Endpoint) -> palisade_analysis::NamedEndpoint {
    palisade_analysis::NamedEndpoint {
        name: Analysis::new(engine).endpoint_name(e.kind, e.ip),
        ip: e.ip,
    }
}

/// `x/a (10.0.0.1)`, the address alone for an address, or `(no address yet)`.
pub fn show(e: &palisade_analysis::NamedEndpoint) -> String {
    if e.ip.is_unspecified() {
        format!("{} (no address yet)", e.name)
    } else if e.name == e.ip.to_string() {
        e.name.clone()
    } else {
        format!("{} ({})", e.name, e.ip)
    }
}

/// A domain name's endpoint: its address in the DNS map (`--dns`), of `family_v6` when it
/// has one.
fn domain_endpoint(
    engine: &Engine,
    name: &str,
    family_v6: Option<bool>,
) -> Result<Endpoint, CliError> {
    let Some(dns) = engine.cluster().dns.as_ref() else {
        return Err(CliError::Usage(format!(
            "{name:?} is neither namespace/pod nor an IP address (a domain name needs a DNS map: --dns FILE)"
        )));
    };
    let entry = dns
        .get(name)
        .ok_or_else(|| CliError::Usage(format!("{name} is not in the DNS map")))?;
    let want_v6 = family_v6.unwrap_or(false);
    let ip = (entry.addresses.iter())
        .find(|ip| ip.is_ipv6() == want_v6)
        .or_else(|| entry.addresses.first())
        .ok_or_else(|| CliError::Usage(format!("{name} has no address in the DNS map")))?;
    Ok(engine.endpoint_for_ip(*ip))
}

/// The `--from/--to/--port/--protocol` of eval and explain.
#[derive(Debug, Clone, clap::Args)]
pub struct FlowArgs {
    /// Source: `namespace/pod` or an IP address.
    #[arg(long)]
    pub from: String,
    /// Destination: `namespace/pod`, an IP address (`ADDRESS:PORT` or `[IPv6]:PORT` with
    /// its port), a Service: `svc/namespace/name[:PORT]` (PORT a Service port's number
    /// or name) or a Service's address, or a domain name of the DNS map (`--dns`).
    #[arg(long)]
    pub to: String,
    /// Destination port: a number (80), a range (8080-8090) or a container port name of
    /// the destination pod (http); for a Service, one of its ports (number or name).
    #[arg(long)]
    pub port: Option<PortArg>,
    /// Protocol: TCP, UDP or SCTP (default TCP; a named port's own protocol).
    #[arg(long, value_parser = parse_protocol)]
    pub protocol: Option<Protocol>,
}

/// What `--port`/`--protocol` ask about the connection between two endpoints.
#[derive(Debug, Clone)]
pub enum Query {
    /// One protocol and port.
    One(palisade_engine::Flow),
    /// Every port of `within`, for each protocol.
    Ports {
        /// Source.
        src: Endpoint,
        /// Destination.
        dst: Endpoint,
        /// Protocols asked about.
        protocols: Vec<Protocol>,
        /// Ports asked about.
        within: PortRange,
    },
}

impl FlowArgs {
    /// The source and destination endpoints, of one address family.
    pub fn ends(&self, engine: &Engine) -> Result<(Endpoint, Endpoint), CliError> {
        // The source's first family if the destination has it, else the other one if both
        // have it: two dual-stack or mixed endpoints meet in the family they share.
        let first = endpoint(engine, &self.from, None)?.ip.is_ipv6();
        for v6 in [first, !first] {
            let src = endpoint(engine, &self.from, Some(v6))?;
            let dst = endpoint(engine, &self.to, Some(v6))?;
            if src.ip.is_ipv6() == v6 && dst.ip.is_ipv6() == v6 {
                return Ok((src, dst));
            }
        }
        Err(CliError::Usage(format!(
            "{} and {} have no address family in common",
            self.from, self.to
        )))
    }

    /// The question asked: one flow (a number, or a name resolved against the destination
    /// pod's container ports), or a range of ports (every port without `--port`).
    pub fn query(&self, engine: &Engine) -> Result<Query, CliError> {
        let (src, dst) = self.ends(engine)?;
        let one = |protocol, port| {
            Query::One(palisade_engine::Flow {
                src,
                dst,
                protocol,
                port,
            })
        };
        let protocols = match self.protocol {
            Some(p) => vec![p],
            None => Protocol::ALL.to_vec(),
        };
        Ok(match &self.port {
            Some(PortArg::Number(n)) => one(self.protocol.unwrap_or(Protocol::Tcp), n.get()),
            Some(PortArg::Named(name)) => {
                let pod = self
                    .to
                    .split_once('/')
                    .and_then(|(ns, n)| engine.pod_id(ns, n))
                    .map(|p| &engine.cluster().pods[p])
                    .ok_or_else(|| {
                        CliError::Usage(format!(
                            "--port {name}: a port name needs a destination pod, and {} is not one",
                            self.to
                        ))
                    })?;
                let cp =
                    ports::resolve_named(&pod.ports, name, self.protocol).ok_or_else(|| {
                        CliError::Usage(format!(
                            "{} has no container port named {name}{} (its ports: {})",
                            self.to,
                            self.protocol
                                .map(|p| format!(" with protocol {p}"))
                                .unwrap_or_default(),
                            ports::list(&pod.ports)
                        ))
                    })?;
                one(cp.protocol, cp.port.get())
            }
            Some(PortArg::Range(r)) => Query::Ports {
                src,
                dst,
                protocols: vec![self.protocol.unwrap_or(Protocol::Tcp)],
                within: *r,
            },
            None => Query::Ports {
                src,
                dst,
                protocols,
                within: ports::all_ports(),
            },
        })
    }
}
