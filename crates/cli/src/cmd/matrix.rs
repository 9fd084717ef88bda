//! `palisade matrix`.

use std::io::Write;

use palisade_engine::{Engine, Matrix, Probe};
use palisade_model::Protocol;

use crate::common::{Input, parse_protocol};
use crate::error::CliError;

/// Arguments of `matrix`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: Input,
    /// Ports to probe (comma-separated). Default: the pods' container ports, each with its protocol.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u16).range(1..))]
    ports: Vec<u16>,
    /// Protocols to probe (comma-separated). With --ports the default is TCP; without,
    /// this filters the container ports.
    #[arg(long, value_delimiter = ',', value_parser = parse_protocol)]
    protocols: Vec<Protocol>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: Format,
}

/// `matrix` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// A grid per probe, `.` allowed and `X` denied.
    Table,
    /// One JSON array of every cell.
    Json,
    /// One JSON object per line and cell.
    Jsonl,
    /// `from,to,protocol,port,allowed` lines.
    Csv,
    /// A Markdown table per probe.
    Md,
    /// Pods grouped into classes no policy tells apart; connectivity between classes.
    Summary,
}

/// The formats of a pod-by-pod grid (`matrix` without `summary`, `lab probe`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GridFormat {
    /// A grid per probe, `.` allowed and `X` denied.
    Table,
    /// One JSON array of every cell.
    Json,
    /// One JSON object per line and cell.
    Jsonl,
    /// `from,to,protocol,port,allowed` lines.
    Csv,
    /// A Markdown table per probe.
    Md,
}

/// The probes asked for: `--ports` × `--protocols` (TCP by default), or the container ports.
pub fn probes(engine: &Engine, ports: &[u16], protocols: &[Protocol]) -> Vec<Probe> {
    if ports.is_empty() {
        return engine
            .container_probes()
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

/// A connectivity grid to print: sources and destinations (the same names), probes, verdicts.
pub struct Grid<'a> {
    /// Row and column names.
    pub names: Vec<String>,
    /// Probes.
    pub probes: Vec<Probe>,
    /// `allowed(probe, from, to)`.
    pub allowed: Box<dyn Fn(usize, usize, usize) -> bool + 'a>,
}

impl Grid<'_> {
    fn allowed(&self, probe: usize, from: usize, to: usize) -> bool {
        (self.allowed)(probe, from, to)
    }
}

/// Evaluates every probe between every pair of pods and prints it.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let probes = probes(&engine, &args.ports, &args.protocols);
    let m = engine.matrix(&probes);
    let names: Vec<String> = m
        .pods
        .iter()
        .map(|&p| engine.cluster().pods[p].key())
        .collect();
    let format = match args.output {
        Format::Summary => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            return Ok(summary(&mut out, &engine, &m, &names)?);
        }
        Format::Table => GridFormat::Table,
        Format::Json => GridFormat::Json,
        Format::Jsonl => GridFormat::Jsonl,
        Format::Csv => GridFormat::Csv,
        Format::Md => GridFormat::Md,
    };
    let grid = Grid {
        names,
        probes: m.probes.clone(),
        allowed: Box::new(|p, f, t| m.allowed(p, f, t)),
    };
    print(format, &grid)
}

/// Prints a grid in one of the row formats (table, json, jsonl, csv, md).
pub fn print(format: GridFormat, g: &Grid<'_>) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    match format {
        GridFormat::Table => table(&mut anstream::AutoStream::auto(stdout.lock()), g)?,
        GridFormat::Jsonl => jsonl(&mut std::io::BufWriter::new(stdout.lock()), g)?,
        GridFormat::Json => json(&mut std::io::BufWriter::new(stdout.lock()), g)?,
        GridFormat::Csv => csv(&mut std::io::BufWriter::new(stdout.lock()), g)?,
        GridFormat::Md => md(&mut std::io::BufWriter::new(stdout.lock()), g)?,
    }
    Ok(())
}

/// Every (probe, from, to) cell in output order.
fn cells<'a>(g: &'a Grid<'_>) -> impl Iterator<Item = (&'a Probe, &'a str, &'a str, bool)> + 'a {
    let names = &g.names;
    g.probes.iter().enumerate().flat_map(move |(pi, probe)| {
        (0..names.len()).flat_map(move |f| {
            (0..names.len()).map(move |t| {
                (
                    probe,
                    names[f].as_str(),
                    names[t].as_str(),
                    g.allowed(pi, f, t),
                )
            })
        })
    })
}

fn jsonl(out: &mut impl Write, g: &Grid<'_>) -> std::io::Result<()> {
    for (probe, from, to, ok) in cells(g) {
        writeln!(
            out,
            "{{\"from\":{},\"to\":{},\"protocol\":\"{}\",\"port\":{},\"allowed\":{ok}}}",
            serde_json::Value::from(from),
            serde_json::Value::from(to),
            probe.protocol,
            probe.port
        )?;
    }
    out.flush()
}

fn json(out: &mut impl Write, g: &Grid<'_>) -> std::io::Result<()> {
    let rows: Vec<serde_json::Value> = cells(g)
        .map(|(probe, from, to, ok)| {
            serde_json::json!({"from": from, "to": to, "protocol": probe.protocol.as_str(), "port": probe.port, "allowed": ok})
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
    writeln!(out)?;
    out.flush()
}

fn csv(out: &mut impl Write, g: &Grid<'_>) -> std::io::Result<()> {
    writeln!(out, "from,to,protocol,port,allowed")?;
    for (probe, from, to, ok) in cells(g) {
        writeln!(out, "{from},{to},{},{},{ok}", probe.protocol, probe.port)?;
    }
    out.flush()
}

fn md(out: &mut impl Write, g: &Grid<'_>) -> std::io::Result<()> {
    for (pi, probe) in g.probes.iter().enumerate() {
        writeln!(out, "### {}/{}\n", probe.protocol, probe.port)?;
        writeln!(out, "| from \\ to | {} |", g.names.join(" | "))?;
        writeln!(out, "|---|{}", "---|".repeat(g.names.len()))?;
        for (f, from) in g.names.iter().enumerate() {
            let row: Vec<&str> = (0..g.names.len())
                .map(|t| if g.allowed(pi, f, t) { "✓" } else { "✗" })
                .collect();
            writeln!(out, "| {from} | {} |", row.join(" | "))?;
        }
        writeln!(out)?;
    }
    out.flush()
}

/// Classes of equivalent pods, then per probe which classes each class reaches.
fn summary(
    out: &mut impl Write,
    engine: &Engine,
    m: &Matrix,
    names: &[String],
) -> std::io::Result<()> {
    let members = m.class_members();
    writeln!(
        out,
        "{} pods in {} classes (pods no policy can tell apart)",
        names.len(),
        members.len()
    )?;
    for (c, rows) in members.iter().enumerate() {
        let pod = &engine.cluster().pods[m.pods[rows[0]]];
        let labels: Vec<String> = pod.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let example: Vec<&str> = rows.iter().take(3).map(|&r| names[r].as_str()).collect();
        let more = if rows.len() > 3 {
            format!(", ... ({} pods)", rows.len())
        } else {
            String::new()
        };
        writeln!(
            out,
            "C{c}: namespace {} {{{}}}: {}{more}",
            pod.namespace,
            labels.join(","),
            example.join(", ")
        )?;
    }
    for (pi, probe) in m.probes.iter().enumerate() {
        writeln!(out, "\n{}/{}:", probe.protocol, probe.port)?;
        for (from, rows) in members.iter().enumerate() {
            let reach: Vec<usize> = (0..members.len())
                .filter(|&to| m.class_allowed(pi, from, to))
                .collect();
            let pods: usize = reach.iter().map(|&to| members[to].len()).sum();
            let list = if reach.len() == members.len() {
                "all classes".to_string()
            } else if reach.is_empty() {
                "no class".to_string()
            } else {
                reach
                    .iter()
                    .map(|c| format!("C{c}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            writeln!(
                out,
                "  C{from} ({} pods) -> {pods} pods: {list}",
                rows.len()
            )?;
        }
    }
    out.flush()
}

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// A grid per probe: rows are sources, columns destinations; `.` allowed, `X` denied.
/// Colour is stripped when stdout is not a terminal or `NO_COLOR` is set.
fn table(out: &mut impl Write, g: &Grid<'_>) -> std::io::Result<()> {
    let width = g.names.iter().map(String::len).max().unwrap_or(4).max(4);
    for (pi, probe) in g.probes.iter().enumerate() {
        writeln!(
            out,
            "{}/{}  (rows: from, columns: to; . allowed, X denied)",
            probe.protocol, probe.port
        )?;
        write!(out, "{:width$}", "")?;
        for (i, _) in g.names.iter().enumerate() {
            write!(out, " {:>3}", i)?;
        }
        writeln!(out)?;
        for (f, from) in g.names.iter().enumerate() {
            write!(out, "{from:width$}")?;
            for t in 0..g.names.len() {
                if g.allowed(pi, f, t) {
                    write!(out, "   {GREEN}.{RESET}")?;
                } else {
                    write!(out, "   {RED}X{RESET}")?;
                }
            }
            writeln!(out, "  [{f}]")?;
        }
        writeln!(out)?;
    }
    out.flush()
}
