//! `palisade eval`.

use std::io::Write;

use palisade_engine::{Endpoint, Engine, Flow, NamedEndpoint, PortSegment};
use palisade_model::{PortRange, Protocol};

use crate::common::{FlowArgs, Input, Query, staged_difference, staged_engine};
use crate::error::CliError;
use crate::report::ports;

/// Arguments of `eval`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade eval -f cluster.yaml --from x/a --to y/b --port 80
  palisade eval -f cluster.yaml --from x/a --to y/b --port http -o json
  palisade eval -f cluster.yaml --from x/a --to y/b            # which ports are allowed?
  palisade eval -f manifests/ --from x/a --to 203.0.113.7 --port 443 --exit-code")]
pub struct Args {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    flow: FlowArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
    /// Exit 0 when the connection is allowed and 3 when it is denied (with a range, every
    /// port of it must be allowed; without --port, some port must be).
    #[arg(long)]
    exit_code: bool,
}

/// `eval` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// `ALLOWED`/`DENIED` with the flow, and one line per side.
    Text,
    /// The flow and the verdict's JSON form: `{"from", "to", "protocol", "port", "allowed",
    /// "egress", "ingress"}`.
    Json,
}

/// Decides the flow (or every port asked about) and prints the verdict; exits 0 for allow
/// and deny alike unless `--exit-code`.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let staged = staged_engine(&engine);
    let mut out = std::io::stdout().lock();
    let allowed = match args.flow.query(&engine)? {
        Query::One(flow) => one(&mut out, &engine, staged.as_ref(), &flow, args.output)?,
        Query::Ports {
            src,
            dst,
            protocols,
            within,
        } => {
            let segments: Vec<PortSegment> = protocols
                .iter()
                .flat_map(|&p| engine.port_segments(src, dst, p, within))
                .collect();
            many(&mut out, &engine, (src, dst), &segments, args.output)?;
            if args.flow.port.is_some() {
                segments.iter().all(|s| s.verdict.allowed)
            } else {
                segments.iter().any(|s| s.verdict.allowed)
            }
        }
    };
    out.flush()?;
    if args.exit_code && !allowed {
        return Err(CliError::Denied);
    }
    Ok(())
}

fn named(engine: &Engine, e: Endpoint) -> NamedEndpoint {
    NamedEndpoint {
        name: engine.endpoint_name(e.kind, e.ip),
        ip: e.ip,
    }
}

/// `x/a (10.0.0.1) -> y/b (10.0.1.2)`.
fn ends(engine: &Engine, src: Endpoint, dst: Endpoint) -> String {
    let (a, b) = (named(engine, src), named(engine, dst));
    let show = |e: &NamedEndpoint| {
        if e.ip.is_unspecified() {
            format!("{} (no address yet)", e.name)
        } else if e.name == e.ip.to_string() {
            e.name.clone()
        } else {
            format!("{} ({})", e.name, e.ip)
        }
    };
    format!("{} -> {}", show(&a), show(&b))
}

/// One flow: `DENIED: x/a (10.0.0.1) -> y/b (10.0.1.2) TCP/80`, then each side.
fn one(
    out: &mut impl Write,
    engine: &Engine,
    staged: Option<&Engine>,
    flow: &Flow,
    format: Format,
) -> Result<bool, CliError> {
    let v = engine.evaluate(flow);
    let depends = engine.depends_on_address(flow);
    let would = staged_difference(staged, flow, &v);
    match format {
        Format::Text => {
            let word = if v.allowed { "ALLOWED" } else { "DENIED" };
            writeln!(
                out,
                "{word}: {} {}/{}",
                ends(engine, flow.src, flow.dst),
                flow.protocol,
                flow.port
            )?;
            writeln!(out, "  egress:  {}", v.egress)?;
            writeln!(out, "  ingress: {}", v.ingress)?;
            if depends {
                writeln!(
                    out,
                    "  note: a policy names CIDRs or nodes, so this depends on the address the workload will get; decided here for an address outside them"
                )?;
            }
            if let Some(w) = &would {
                let word = if w.allowed { "ALLOWED" } else { "DENIED" };
                writeln!(out, "  staged: with the staged policies enforced, {word}")?;
                writeln!(out, "    egress:  {}", w.egress)?;
                writeln!(out, "    ingress: {}", w.ingress)?;
            }
        }
        Format::Json => {
            let mut json = serde_json::json!({
                "from": named(engine, flow.src),
                "to": named(engine, flow.dst),
                "protocol": flow.protocol.as_str(),
                "port": flow.port,
                "allowed": v.allowed,
                "egress": v.egress,
                "ingress": v.ingress,
            });
            if depends {
                json["dependsOnAddress"] = true.into();
            }
            if let Some(w) = &would {
                json["staged"] = serde_json::to_value(w)?;
            }
            writeln!(out, "{}", serde_json::to_string(&json)?)?;
        }
    }
    Ok(v.allowed)
}

/// The allowed ports per protocol, as maximal ranges.
fn allowed_ranges(segments: &[PortSegment]) -> Vec<(Protocol, Vec<PortRange>)> {
    let mut out: Vec<(Protocol, Vec<PortRange>)> = Vec::new();
    for s in segments {
        if out.last().is_none_or(|(p, _)| *p != s.protocol) {
            out.push((s.protocol, Vec::new()));
        }
        let Some((_, r)) = out.last_mut() else {
            continue;
        };
        match r.last_mut() {
            // Runs allowed by different rules are one range of allowed ports.
            Some(prev)
                if s.verdict.allowed
                    && prev.end.get().checked_add(1) == Some(s.range.start.get()) =>
            {
                prev.end = s.range.end;
            }
            _ if s.verdict.allowed => r.push(s.range),
            _ => {}
        }
    }
    out
}

/// Ports asked about: the allowed ranges per protocol, then every run of ports with its verdict.
fn many(
    out: &mut impl Write,
    engine: &Engine,
    (src, dst): (Endpoint, Endpoint),
    segments: &[PortSegment],
    format: Format,
) -> Result<(), CliError> {
    let allowed = allowed_ranges(segments);
    match format {
        Format::Text => {
            writeln!(out, "{}", ends(engine, src, dst))?;
            let summary: Vec<String> = allowed
                .iter()
                .map(|(p, r)| format!("{p} {}", ports::ranges(r)))
                .collect();
            writeln!(out, "allowed: {}", summary.join("; "))?;
            for s in segments {
                let word = if s.verdict.allowed {
                    "ALLOWED"
                } else {
                    "DENIED"
                };
                writeln!(out, "{} {}: {word}", s.protocol, s.range)?;
                writeln!(out, "  egress:  {}", s.verdict.egress)?;
                writeln!(out, "  ingress: {}", s.verdict.ingress)?;
            }
        }
        Format::Json => {
            let by_protocol: serde_json::Map<String, serde_json::Value> = allowed
                .iter()
                .map(|(p, r)| {
                    let r: Vec<String> = r.iter().map(PortRange::to_string).collect();
                    (p.as_str().to_string(), serde_json::json!(r))
                })
                .collect();
            let json = serde_json::json!({
                "from": named(engine, src),
                "to": named(engine, dst),
                "allowedPorts": by_protocol,
                "segments": segments,
            });
            writeln!(out, "{}", serde_json::to_string(&json)?)?;
        }
    }
    Ok(())
}
