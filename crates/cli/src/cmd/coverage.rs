//! `palisade coverage`.

use std::io::Write;

use palisade_analysis::{
    Analysis, Coverage, EndpointAdmission, Exposure, PodCoverage, SeenSource, ServiceExposure,
    SideCoverage,
};
use palisade_engine::Reach;
use palisade_model::Direction;

use crate::common::Input;
use crate::error::CliError;

/// Arguments of `coverage`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade coverage -f cluster/ policies/
  palisade coverage -f cluster/ policies/ -o md > coverage.md
  palisade coverage --kube -o json

The report leads with exposure: the pods that accept connections from outside the
cluster (and on which ports), the pods in default deny for each direction, and the pods
that policies select but that still allow every connection.")]
pub struct Args {
    #[command(flatten)]
    input: Input,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
}

/// `coverage` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// Per pod: the policies of each direction and the exposure; then what nothing covers.
    Text,
    /// `{"pods": [...], "hostNetwork": [...], "openNamespaces": [...]}`.
    Json,
    /// A Markdown table per pod, then the lists.
    Md,
}

/// Prints which policies cover every pod, what nothing covers, and what is exposed.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let c = Analysis::new(&engine).coverage();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        Format::Text => text(&mut out, &c)?,
        Format::Md => md(&mut out, &c)?,
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&c)?)?,
    }
    out.flush()?;
    Ok(())
}

/// `isolated by NetworkPolicy x/a; Admin: AdminNetworkPolicy p` or `open (no policy)`,
/// then whether it is default deny or still open.
fn side(s: &SideCoverage) -> String {
    if s.no_policy() {
        return "open (no policy applies)".into();
    }
    let names = |v: &[std::sync::Arc<palisade_engine::PolicyInfo>]| {
        v.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !s.admin.is_empty() {
        parts.push(format!("Admin: {}", names(&s.admin)));
    }
    if !s.isolated_by.is_empty() {
        parts.push(format!("isolated by {}", names(&s.isolated_by)));
    }
    if !s.baseline.is_empty() {
        parts.push(format!("Baseline: {}", names(&s.baseline)));
    }
    let mut out = parts.join("; ");
    if s.is_open() {
        out.push_str(" — still open: every connection allowed");
    } else if s.default_deny {
        out.push_str(" — default deny");
    }
    out
}

fn exposure(e: Option<&Exposure>) -> String {
    match e {
        None => "no address".into(),
        Some(e) if e.ports.is_empty() => "not reachable from outside".into(),
        Some(e) => {
            let ports: Vec<String> = e.ports.iter().map(|p| p.to_string()).collect();
            let from = if e.from_everywhere {
                "from any address outside the cluster".to_string()
            } else {
                let ips: Vec<String> = e.sources.iter().map(|ip| ip.to_string()).collect();
                format!(
                    "from some addresses outside the cluster (e.g. {})",
                    ips.join(", ")
                )
            };
            format!("{} {from}", ports.join("; "))
        }
    }
}

/// The headline: exposure, default deny, and pods selected but still open.
fn headline(out: &mut impl Write, c: &Coverage) -> std::io::Result<()> {
    let exposed: Vec<_> = c.exposed().collect();
    writeln!(
        out,
        "exposed: {} of {} pod(s) accept connections from outside the cluster",
        exposed.len(),
        c.pods.len()
    )?;
    for (p, e) in exposed.iter().take(10) {
        writeln!(out, "  {}: {}", p.key, exposure(Some(e)))?;
    }
    if exposed.len() > 10 {
        writeln!(
            out,
            "  and {} more (-o json lists them all)",
            exposed.len() - 10
        )?;
    }
    services(out, c)?;
    let count = |it: &mut dyn Iterator<Item = &PodCoverage>| it.count();
    writeln!(
        out,
        "default deny: {} of {n} pod(s) for ingress, {} for egress",
        count(&mut c.default_deny(Direction::Ingress)),
        count(&mut c.default_deny(Direction::Egress)),
        n = c.pods.len()
    )?;
    for dir in [Direction::Ingress, Direction::Egress] {
        let names: Vec<&str> = c.selected_but_open(dir).map(|p| p.key.as_str()).collect();
        if !names.is_empty() {
            writeln!(
                out,
                "selected but open for {}: {} pod(s) that policies select still allow every connection: {}",
                dir.as_str().to_lowercase(),
                names.len(),
                some(&names)
            )?;
        }
    }
    writeln!(out)
}

/// The Services that carry connections from outside, each port with where it is reached
/// and, per endpoint, whether it admits them and from which source address.
fn services(out: &mut impl Write, c: &Coverage) -> std::io::Result<()> {
    if c.services.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "exposed through Services: {} Service(s) carry connections from outside the cluster",
        c.services.len()
    )?;
    for svc in &c.services {
        writeln!(
            out,
            "  svc/{} ({}, {}:{}): {}",
            svc.service,
            svc.service_type.as_str(),
            svc.origin.file,
            svc.origin.line,
            svc.seen_text()
        )?;
        for p in &svc.ports {
            writeln!(
                out,
                "    {} {} ({}) via {}",
                p.port.protocol,
                p.port.port,
                p.port.label(),
                p.via.join(", ")
            )?;
            if p.endpoints.is_empty() {
                writeln!(out, "      no endpoint: connections through it fail")?;
            }
            for e in &p.endpoints {
                writeln!(out, "      {}: {}", e.endpoint, admission(svc, e))?;
            }
        }
    }
    Ok(())
}

/// `admits some of the sources it may see (1 of 4: 192.168.0.2)`, `admits any address
/// outside the cluster`, ...
fn admission(svc: &ServiceExposure, e: &EndpointAdmission) -> String {
    let ips = || {
        e.admitted
            .iter()
            .map(|ip| ip.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match (svc.seen, e.reach) {
        (SeenSource::Node, None) => {
            "not known: no node with an address of this family in the input".into()
        }
        (SeenSource::Node, Some(Reach::All)) => format!(
            "admits every source it may see ({} of {}: other nodes' addresses, outside addresses through its own node)",
            e.tried, e.tried
        ),
        (SeenSource::Node, Some(Reach::Some)) => format!(
            "admits some of the sources it may see ({} of {}: {})",
            e.admitted.len(),
            e.tried,
            ips()
        ),
        (SeenSource::Node, Some(Reach::None)) => {
            "admits none of the sources it may see: connections through it are refused".into()
        }
        (SeenSource::Client, Some(Reach::All)) => "admits any address outside the cluster".into(),
        (SeenSource::Client, Some(Reach::Some)) => {
            format!("admits some addresses outside the cluster (e.g. {})", ips())
        }
        (SeenSource::Client, _) => {
            "admits no address outside the cluster: connections through it are refused".into()
        }
    }
}

fn text(out: &mut impl Write, c: &Coverage) -> std::io::Result<()> {
    headline(out, c)?;
    for p in &c.pods {
        writeln!(out, "{}", p.key)?;
        writeln!(out, "  ingress: {}", side(&p.ingress))?;
        writeln!(out, "  egress:  {}", side(&p.egress))?;
        writeln!(out, "  exposed: {}", exposure(p.exposure.as_ref()))?;
    }
    lists(out, c)
}

fn lists(out: &mut impl Write, c: &Coverage) -> std::io::Result<()> {
    for dir in [Direction::Ingress, Direction::Egress] {
        let open: Vec<&str> = c.open(dir).map(|p| p.key.as_str()).collect();
        writeln!(
            out,
            "open (every connection allowed) for {2}: {0} of {1} pod(s){3}{4}",
            open.len(),
            c.pods.len(),
            dir.as_str().to_lowercase(),
            if open.is_empty() { "" } else { ": " },
            some(&open)
        )?;
    }
    if !c.open_namespaces.is_empty() {
        writeln!(
            out,
            "namespaces no policy covers: {}",
            some(
                &c.open_namespaces
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            )
        )?;
    }
    let exposed: Vec<&str> = c.exposed().map(|(p, _)| p.key.as_str()).collect();
    writeln!(
        out,
        "{} pod(s) reachable from outside the cluster{}{}",
        exposed.len(),
        if exposed.is_empty() { "" } else { ": " },
        some(&exposed)
    )?;
    if !c.host_network.is_empty() {
        writeln!(
            out,
            "host-network pods (never policy subjects): {}",
            some(
                &c.host_network
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
            )
        )?;
    }
    Ok(())
}

/// At most ten names, then how many more (`-o json` lists them all).
fn some(names: &[&str]) -> String {
    let mut s = names
        .iter()
        .take(10)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 10 {
        s.push_str(&format!(" and {} more", names.len() - 10));
    }
    s
}

fn md(out: &mut impl Write, c: &Coverage) -> std::io::Result<()> {
    let cell = |s: String| s.replace('|', "\\|");
    headline(out, c)?;
    writeln!(out, "| pod | ingress | egress | exposed |")?;
    writeln!(out, "|---|---|---|---|")?;
    for p in &c.pods {
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            p.key,
            cell(side(&p.ingress)),
            cell(side(&p.egress)),
            cell(exposure(p.exposure.as_ref()))
        )?;
    }
    writeln!(out)?;
    lists(out, c)
}
