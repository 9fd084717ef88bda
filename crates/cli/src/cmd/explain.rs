//! `palisade explain`.

use std::io::Write;

use palisade_analysis::Analysis;
use palisade_engine::{Engine, Flow};

use crate::common::{FlowArgs, Input, Query, staged_difference, staged_engine};
use crate::error::CliError;
use crate::service_query::{ServiceQuery, endpoint_line};

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade explain -f cluster.yaml --from x/a --to y/b --port 80
  palisade explain -f cluster.yaml --from x/a --to y/b --port http -o json
  palisade explain -f cluster.yaml --from x/a --to y/b --port 8080-8090   # one walk per run of ports
  palisade explain -f cluster.yaml --from shop/web-0 --to svc/shop/orders:http   # one walk per endpoint")]
pub struct Args {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    flow: FlowArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
}

/// `explain` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// The tier-by-tier walk of both sides, with why each rule did not match.
    Text,
    /// The verdict's JSON form plus `walk`: the tiers each side went through.
    Json,
}

/// Prints the tier-by-tier walk: of the one flow asked, or of one port of each run of ports
/// that the policies treat alike when `--port` is a range.
pub fn run(args: Args) -> Result<(), CliError> {
    let flow_args = args.flow.split_address_port()?;
    let engine = args.input.engine()?;
    let analysis = Analysis::new(&engine);
    let mut out = std::io::stdout().lock();
    if let Some(q) = flow_args.service_query(&engine)? {
        service(&mut out, &engine, &q, args.output)?;
        out.flush()?;
        return Ok(());
    }
    if flow_args.port.is_none() {
        return Err(CliError::Usage(
            "explain needs --port (a number, a range or a port name); `palisade eval` without --port lists the allowed ports".into(),
        ));
    }
    match flow_args.query(&engine)? {
        Query::One(flow) => {
            let explanation = analysis.explain(&flow);
            let staged = staged_engine(&engine);
            let would = staged_difference(staged.as_ref(), &flow, &explanation.verdict);
            let domain = match &explanation.verdict.egress.decision {
                palisade_engine::Decision::Rule(m) => engine.domain_hit(m, &flow),
                _ => None,
            };
            match (args.output, would) {
                (Format::Text, would) => {
                    write!(out, "{explanation}")?;
                    if let Some(hit) = &domain {
                        writeln!(out, "Domain: {hit}")?;
                    }
                    if let Some(w) = would {
                        writeln!(out, "Staged policies: with them enforced, {w}")?;
                    }
                }
                (Format::Json, None) if domain.is_none() => {
                    writeln!(out, "{}", serde_json::to_string(&explanation)?)?;
                }
                (Format::Json, would) => {
                    let mut v = serde_json::to_value(&explanation)?;
                    if let Some(w) = would {
                        v["staged"] = serde_json::to_value(&w)?;
                    }
                    if let Some(hit) = &domain {
                        v["domain"] = serde_json::to_value(hit)?;
                    }
                    writeln!(out, "{v}")?;
                }
            }
        }
        Query::Ports {
            src,
            dst,
            protocols,
            within,
        } => {
            let mut all = Vec::new();
            for protocol in protocols {
                for s in analysis.port_segments(src, dst, protocol, within) {
                    let flow = Flow {
                        src,
                        dst,
                        protocol,
                        port: s.range.start.get(),
                    };
                    let explanation = analysis.explain(&flow);
                    match args.output {
                        Format::Text => {
                            writeln!(out, "== {protocol} {} ==", s.range)?;
                            writeln!(out, "{explanation}")?;
                        }
                        Format::Json => {
                            let mut v = serde_json::to_value(&explanation)?;
                            if let Some(m) = v.as_object_mut() {
                                m.insert("ports".into(), s.range.to_string().into());
                            }
                            all.push(v);
                        }
                    }
                }
            }
            if let Format::Json = args.output {
                writeln!(out, "{}", serde_json::to_string(&all)?)?;
            }
        }
    }
    out.flush()?;
    Ok(())
}

/// A Service: per port asked (every port without `--port`), the walk of the connection to
/// each endpoint, and what a client experiences.
fn service(
    out: &mut impl Write,
    engine: &Engine,
    q: &ServiceQuery<'_>,
    format: Format,
) -> Result<(), CliError> {
    let answers = q.answers(engine);
    let analysis = Analysis::new(engine);
    match format {
        Format::Text => {
            for a in &answers {
                writeln!(out, "{}", q.head(engine, a))?;
                for v in &a.verdicts {
                    writeln!(out, "== {} ==", endpoint_line(engine, v))?;
                    writeln!(out, "{}", analysis.explain_through_service(&v.flow))?;
                }
                q.write_left_out(out, engine, a)?;
                writeln!(out, "clients: {}", a.clients())?;
            }
        }
        Format::Json => {
            let ports = answers
                .iter()
                .map(|a| {
                    a.json(engine, |v| {
                        Ok(serde_json::to_value(
                            analysis.explain_through_service(&v.flow),
                        )?)
                    })
                })
                .collect::<Result<Vec<_>, CliError>>()?;
            let mut json = q.json_head(engine);
            json["ports"] = ports.into();
            writeln!(out, "{}", serde_json::to_string(&json)?)?;
        }
    }
    Ok(())
}
