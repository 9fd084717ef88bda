//! `palisade diff`.

use std::io::Write;
use std::path::PathBuf;

use palisade_engine::diff::{self, Diff};
use palisade_engine::{Engine, Probe};
use palisade_model::Protocol;

use crate::common::{Input, parse_protocol};
use crate::error::CliError;

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The old state: `-f` (and the loading options) as for every analysis command.
    #[command(flatten)]
    input: Input,
    /// The new state: files or directories, read like `-f`.
    #[arg(long = "to", num_args = 1.., required_unless_present = "staged", conflicts_with = "staged")]
    to: Vec<PathBuf>,
    /// Compare the state of `-f` as enforced with the same state with its staged policies
    /// (annotated palisade.dev/staged: "true") enforced too.
    #[arg(long)]
    staged: bool,
    /// Ports to probe (comma-separated). Default: the pods' container ports in either state.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
    ports: Vec<u16>,
    /// Protocols to probe (comma-separated). With --ports the default is TCP; without,
    /// this filters the container ports.
    #[arg(long, value_delimiter = ',', value_parser = parse_protocol)]
    protocols: Vec<Protocol>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
}

/// `diff` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// One line per change: pods, probes, and what decided before and after.
    Text,
    /// One JSON document with every change group.
    Json,
    /// One line per changed connection, as `matrix -o jsonl` plus the change and verdicts.
    Jsonl,
    /// A Markdown table of the changes.
    Md,
}

/// Prints what changes; exits 3 when something does.
pub fn run(args: Args) -> Result<(), CliError> {
    let old = args.input.engine()?;
    let new = if args.staged {
        Engine::new(old.cluster().with_staged(), old.options())
    } else {
        // The new state is the files given with --to, even when the old one is a live
        // cluster (--kube).
        Input {
            files: args.to.clone(),
            kube: false,
            kubeconfig: None,
            context: None,
            ..args.input.clone()
        }
        .engine()?
    };
    let probes = probes(&old, &new, &args.ports, &args.protocols);
    let d = diff::diff(&old, &new, &probes);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        Format::Text => text(&mut out, &d, &old)?,
        Format::Md => md(&mut out, &d, &old)?,
        Format::Jsonl => jsonl(&mut out, &d)?,
        Format::Json => json(&mut out, &d)?,
    }
    out.flush()?;
    if d.is_empty() {
        Ok(())
    } else {
        Err(CliError::Differs)
    }
}

/// `--ports` × `--protocols` (TCP by default), or the container ports of either state.
fn probes(old: &Engine, new: &Engine, ports: &[u16], protocols: &[Protocol]) -> Vec<Probe> {
    if ports.is_empty() {
        return diff::default_probes(old, new)
            .into_iter()
            .filter(|p| protocols.is_empty() || protocols.contains(&p.protocol))
            .collect();
    }
    let protocols = if protocols.is_empty() {
        &[Protocol::Tcp][..]
    } else {
        protocols
    };
    protocols
        .iter()
        .flat_map(|&protocol| ports.iter().map(move |&port| Probe { protocol, port }))
        .collect()
}

fn probe_list(probes: &[Probe]) -> String {
    probes
        .iter()
        .map(|p| format!("{} {}", p.protocol, p.port))
        .collect::<Vec<_>>()
        .join(", ")
}

fn text(out: &mut impl Write, d: &Diff, old: &Engine) -> std::io::Result<()> {
    for m in d.merged() {
        writeln!(
            out,
            "{:<6} {} -> {} on {} ({} connection(s) per port)",
            m.change.as_str(),
            d.describe(old, &m.from),
            d.describe(old, &m.to),
            probe_list(&m.probes),
            m.connections
        )?;
        writeln!(out, "       before: {}", m.before)?;
        writeln!(out, "       after:  {}", m.after)?;
    }
    pods_lines(out, d)?;
    let (gained, lost) = d.counts();
    if d.is_empty() {
        writeln!(out, "no change over {} probe(s)", d.probes.len())
    } else {
        writeln!(
            out,
            "{gained} connection(s) gained, {lost} lost over {} probe(s)",
            d.probes.len()
        )
    }
}

fn pods_lines(out: &mut impl Write, d: &Diff) -> std::io::Result<()> {
    if !d.pods_added.is_empty() {
        writeln!(out, "pods added: {}", d.pods_added.join(", "))?;
    }
    if !d.pods_removed.is_empty() {
        writeln!(out, "pods removed: {}", d.pods_removed.join(", "))?;
    }
    Ok(())
}

fn md(out: &mut impl Write, d: &Diff, old: &Engine) -> std::io::Result<()> {
    let (gained, lost) = d.counts();
    writeln!(
        out,
        "**{gained}** connection(s) gained, **{lost}** lost over {} probe(s).\n",
        d.probes.len()
    )?;
    let cell = |s: &str| s.replace('|', "\\|");
    if !d.groups.is_empty() {
        writeln!(out, "| change | from | to | ports | before | after |")?;
        writeln!(out, "|---|---|---|---|---|---|")?;
        for m in d.merged() {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                m.change.as_str(),
                cell(&d.describe(old, &m.from)),
                cell(&d.describe(old, &m.to)),
                probe_list(&m.probes),
                cell(&m.before),
                cell(&m.after)
            )?;
        }
    }
    if !d.pods_added.is_empty() || !d.pods_removed.is_empty() {
        writeln!(out)?;
        pods_lines(out, d)?;
    }
    Ok(())
}

fn jsonl(out: &mut impl Write, d: &Diff) -> Result<(), CliError> {
    for (g, a, b) in d.changes() {
        let line = serde_json::json!({
            "from": a.key,
            "to": b.key,
            "protocol": g.probe.protocol.as_str(),
            "port": g.probe.port,
            "allowed": g.change == diff::ChangeKind::Gained,
            "change": g.change.as_str(),
            "before": g.before,
            "after": g.after,
        });
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn json(out: &mut impl Write, d: &Diff) -> Result<(), CliError> {
    let (gained, lost) = d.counts();
    let keys = |c: usize| {
        d.classes[c]
            .iter()
            .map(|p| p.key.clone())
            .collect::<Vec<_>>()
    };
    let changes: Vec<serde_json::Value> = d
        .groups
        .iter()
        .map(|g| {
            serde_json::json!({
                "change": g.change.as_str(),
                "protocol": g.probe.protocol.as_str(),
                "port": g.probe.port,
                "from": keys(g.from),
                "to": keys(g.to),
                "connections": d.size(g),
                "before": g.before,
                "after": g.after,
            })
        })
        .collect();
    let probes: Vec<serde_json::Value> = d
        .probes
        .iter()
        .map(|p| serde_json::json!({"protocol": p.protocol.as_str(), "port": p.port}))
        .collect();
    let doc = serde_json::json!({
        "same": d.is_empty(),
        "probes": probes,
        "gained": gained,
        "lost": lost,
        "podsAdded": d.pods_added,
        "podsRemoved": d.pods_removed,
        "changes": changes,
    });
    writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}
