//! `palisade eval`.

use std::io::Write;

use palisade_analysis::{Analysis, PortSegment};
use palisade_engine::{Endpoint, EndpointVerdict, Engine, Flow};
use palisade_model::{PortRange, Protocol};

use crate::common::{FlowArgs, Input, Query, named, show, staged_difference, staged_engine};
use crate::error::CliError;
use crate::report::ports;
use crate::service_query::{ServiceQuery, endpoint_line};

/// Arguments of `eval`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade eval -f cluster.yaml --from x/a --to y/b --port 80
  palisade eval -f cluster.yaml --from x/a --to y/b --port http -o json
  palisade eval -f cluster.yaml --from x/a --to y/b            # which ports are allowed?
  palisade eval -f manifests/ --from x/a --to 203.0.113.7 --port 443 --exit-code
  palisade eval -f cluster.yaml --from shop/web-0 --to svc/shop/orders:http   # each endpoint
  palisade eval -f cluster.yaml --from shop/web-0 --to 10.96.0.12:80          # a Service address")]
pub struct Args {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    flow: FlowArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
    /// Exit 0 when the connection is allowed and 3 when it is denied (with a range, every
    /// port of it must be allowed; without --port, some port must be; for a Service, every
    /// endpoint of every port asked must admit it).
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
    let flow_args = args.flow.split_address_port()?;
    if let Some(q) = flow_args.service_query(&engine)? {
        let allowed = service(&mut out, &engine, staged.as_ref(), &q, args.output)?;
        out.flush()?;
        if args.exit_code && !allowed {
            return Err(CliError::Denied);
        }
        return Ok(());
    }
    let allowed = match flow_args.query(&engine)? {
        Query::One(flow) => one(&mut out, &engine, staged.as_ref(), &flow, args.output)?,
        Query::Ports {
            src,
            dst,
            protocols,
            within,
        } => {
            let segments: Vec<PortSegment> = protocols
                .iter()
                .flat_map(|&p| Analysis::new(&engine).port_segments(src, dst, p, within))
                .collect();
            many(&mut out, &engine, (src, dst), &segments, args.output)?;
            if flow_args.port.is_some() {
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

/// `x/a (10.0.0.1) -> y/b (10.0.1.2)`.
fn ends(engine: &Engine, src: Endpoint, dst: Endpoint) -> String {
    format!(
        "{} -> {}",
        show(&named(engine, src)),
        show(&named(engine, dst))
    )
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
    let domain = match &v.egress.decision {
        palisade_engine::Decision::Rule(m) => engine.domain_hit(m, flow),
        _ => None,
    };
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
            if let Some(hit) = domain {
                writeln!(out, "           {hit}")?;
            }
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
            if let Some(hit) = &domain {
                json["domain"] = serde_json::to_value(hit)?;
            }
            if let Some(w) = &would {
                json["staged"] = serde_json::to_value(w)?;
            }
            writeln!(out, "{}", serde_json::to_string(&json)?)?;
        }
    }
    Ok(v.allowed)
}

/// A Service: per port, the verdict at each endpoint and what a client experiences. True
/// when every endpoint of every port asked admits the client (and there is one).
fn service(
    out: &mut impl Write,
    engine: &Engine,
    staged: Option<&Engine>,
    q: &ServiceQuery<'_>,
    format: Format,
) -> Result<bool, CliError> {
    let answers = q.answers(engine);
    let would = |v: &EndpointVerdict| {
        staged.and_then(|s| {
            let w = s.evaluate_through_service(&v.flow);
            (w.allowed != v.verdict.allowed).then_some(w)
        })
    };
    match format {
        Format::Text => {
            for a in &answers {
                writeln!(out, "{}", q.head(engine, a))?;
                for v in &a.verdicts {
                    writeln!(out, "  {}", endpoint_line(engine, v))?;
                    writeln!(out, "    egress:  {}", v.verdict.egress)?;
                    writeln!(out, "    ingress: {}", v.verdict.ingress)?;
                    if let Some(w) = would(v) {
                        let word = if w.allowed { "ALLOWED" } else { "DENIED" };
                        writeln!(out, "    staged: with the staged policies enforced, {word}")?;
                    }
                }
                q.write_left_out(out, engine, a)?;
                writeln!(out, "  clients: {}", a.clients())?;
            }
        }
        Format::Json => {
            let ports = answers
                .iter()
                .map(|a| {
                    a.json(engine, |v| {
                        let mut e = serde_json::json!({
                            "allowed": v.verdict.allowed,
                            "egress": v.verdict.egress,
                            "ingress": v.verdict.ingress,
                        });
                        if let Some(w) = would(v) {
                            e["staged"] = serde_json::to_value(&w)?;
                        }
                        Ok(e)
                    })
                })
                .collect::<Result<Vec<_>, CliError>>()?;
            let mut json = q.json_head(engine);
            json["ports"] = ports.into();
            writeln!(out, "{}", serde_json::to_string(&json)?)?;
        }
    }
    Ok(answers
        .iter()
        .all(|a| a.reach() == palisade_engine::Reach::All))
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
