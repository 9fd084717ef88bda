//! `palisade eval`.

use std::io::Write;

use palisade_engine::{Decision, EndpointKind, Engine, Flow, SideVerdict};
use palisade_model::Direction;
use serde_json::{Value, json};

use crate::common::{FlowArgs, Input};
use crate::error::CliError;

/// Arguments of `eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: Input,
    #[command(flatten)]
    flow: FlowArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
}

/// `eval` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

/// Decides the flow and prints the verdict; exits 0 for allow and deny alike.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let flow = args.flow.flow(&engine)?;
    let v = engine.evaluate(&flow);
    let mut out = std::io::stdout().lock();
    match args.output {
        Format::Json => {
            let doc = json!({
                "allowed": v.allowed,
                "egress": side_json(&engine, &v.egress, &flow, Direction::Egress),
                "ingress": side_json(&engine, &v.ingress, &flow, Direction::Ingress),
            });
            writeln!(out, "{doc}")?;
        }
        Format::Text => {
            writeln!(out, "{}", if v.allowed { "ALLOWED" } else { "DENIED" })?;
            writeln!(
                out,
                "  egress:  {}",
                engine.describe_side(&v.egress, pod(flow.src.kind), Direction::Egress)
            )?;
            writeln!(
                out,
                "  ingress: {}",
                engine.describe_side(&v.ingress, pod(flow.dst.kind), Direction::Ingress)
            )?;
        }
    }
    Ok(())
}

fn pod(kind: EndpointKind) -> Option<usize> {
    match kind {
        EndpointKind::Pod(p) => Some(p),
        _ => None,
    }
}

/// One side as JSON: allowed, tier, and the deciding policy and rule (or the isolating policies).
pub fn side_json(engine: &Engine, side: &SideVerdict, flow: &Flow, dir: Direction) -> Value {
    let subject = match dir {
        Direction::Egress => pod(flow.src.kind),
        Direction::Ingress => pod(flow.dst.kind),
    };
    let mut obj = json!({"allowed": side.allowed, "tier": side.tier.as_str()});
    let rule_json = |m: &palisade_engine::RuleMatch| {
        let r = engine.policy_ref(m.policy);
        let (name, action) = match m.policy {
            palisade_engine::PolicyId::Admin(i) => {
                let p = &engine.cluster().admin_policies[i as usize];
                (
                    p.rules(m.direction)
                        .get(m.index as usize)
                        .and_then(|r| r.name.clone()),
                    p.action_name(m.action),
                )
            }
            _ => (None, "Allow"),
        };
        json!({
            "policy": {"kind": r.kind.as_str(), "namespace": r.namespace, "name": r.name},
            "rule": {"index": m.index, "name": name},
            "action": action,
            "failClosed": m.fail_closed,
        })
    };
    match &side.decision {
        Decision::Exempt(e) => {
            obj["reason"] = json!(format!("{e:?}"));
        }
        Decision::Rule(m) => {
            if let (Value::Object(o), Value::Object(r)) = (&mut obj, rule_json(m)) {
                o.extend(r);
            }
        }
        Decision::Isolated => {
            let list: Vec<Value> = subject
                .map(|p| engine.isolating(p, dir))
                .unwrap_or_default()
                .into_iter()
                .map(|id| {
                    let r = engine.policy_ref(id);
                    json!({"kind": r.kind.as_str(), "namespace": r.namespace, "name": r.name})
                })
                .collect();
            obj["reason"] = json!("IsolatedNoRuleMatched");
            obj["isolating"] = Value::Array(list);
        }
        Decision::NoPolicy => {
            obj["reason"] = json!("NoPolicy");
        }
    }
    if !side.passes.is_empty() {
        obj["passedBy"] = Value::Array(side.passes.iter().map(rule_json).collect());
    }
    obj
}
