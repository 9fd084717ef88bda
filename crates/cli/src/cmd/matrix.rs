//! `palisade matrix`.

mod services;

use std::collections::BTreeSet;

use rayon::prelude::*;

use palisade_analysis::{Analysis, Probe};
use palisade_engine::{Engine, PodId};
use palisade_model::Protocol;

use crate::common::{Input, parse_protocol};
use crate::error::CliError;
use crate::report::focus::Focus;
use crate::report::ports::PortArg;
use crate::report::table::{MAX_ENDPOINTS, table};
use crate::report::view::{self, ProbeCol, View};
use crate::report::{dot, html, summary};

/// Most probes one matrix evaluates (ranges expand to one probe per port).
const MAX_PROBES: usize = 1024;

/// Arguments of `matrix`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade matrix -f cluster.yaml -o summary
  palisade matrix -f cluster.yaml --namespace shop --direction ingress --ports 80,8080-8082,http
  palisade matrix -f cluster.yaml -o html > matrix.html      # open in a browser, offline
  palisade matrix -f cluster.yaml -o dot | dot -Tsvg > matrix.svg
  palisade matrix -f cluster.yaml --services --to svc/shop/orders")]
pub struct Args {
    #[command(flatten)]
    input: Input,
    /// Ports to probe (comma-separated): numbers (80), ranges (8080-8090) and container
    /// port names (http, resolved per destination pod). Default: the pods' container
    /// ports, each with its protocol.
    #[arg(long, value_delimiter = ',')]
    ports: Vec<PortArg>,
    /// Protocols to probe (comma-separated). With --ports the default is TCP; without,
    /// this filters the container ports.
    #[arg(long, value_delimiter = ',', value_parser = parse_protocol)]
    protocols: Vec<Protocol>,
    #[command(flatten)]
    focus: Focus,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "table")]
    output: Format,
    /// Print a table of more than 200 sources or destinations anyway.
    #[arg(long)]
    force: bool,
    /// Services as destinations: a column per Service port, each cell whether the source
    /// reaches all, some or none of the port's endpoints. `--to` then names Services
    /// (`svc/NS/NAME`), and `--ports`/`--protocols` pick Service ports.
    #[arg(long)]
    services: bool,
}

/// `matrix` output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A grid per probe with the destinations' names as column headers, `.` allowed and `X` denied.
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
    /// A Graphviz graph of allowed connections between classes, grouped by namespace.
    Dot,
    /// One self-contained HTML page: a heatmap with filters and every cell's explanation.
    Html,
}

/// The formats of a pod-by-pod grid (`matrix` without `summary`, `lab probe`).
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GridFormat {
    /// A grid per probe with the destinations' names as column headers.
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
        return Analysis::new(engine)
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

/// The probes of `--ports` given as numbers, ranges and names: a name becomes one probe per
/// (protocol, number) some destination shown (`dests`) gives that name, applying only to
/// the pods that do.
fn probe_cols(
    engine: &Engine,
    dests: &[PodId],
    ports: &[PortArg],
    protocols: &[Protocol],
) -> Result<Vec<ProbeCol>, CliError> {
    if ports.is_empty() {
        return Ok(probes(engine, &[], protocols)
            .into_iter()
            .map(|probe| ProbeCol { probe, name: None })
            .collect());
    }
    let numbered = if protocols.is_empty() {
        &[Protocol::Tcp][..]
    } else {
        protocols
    };
    let mut out: Vec<ProbeCol> = Vec::new();
    for arg in ports {
        match arg {
            PortArg::Number(n) => out.extend(numbered.iter().map(|&protocol| ProbeCol {
                probe: Probe {
                    protocol,
                    port: n.get(),
                },
                name: None,
            })),
            PortArg::Range(r) => {
                let count = usize::from(r.end.get() - r.start.get()) + 1;
                if out.len() + count * numbered.len() > MAX_PROBES {
                    return Err(CliError::Usage(format!(
                        "--ports {r} asks for more than {MAX_PROBES} probes; `palisade eval --from A --to B` lists the allowed ports of one pair as ranges"
                    )));
                }
                for &protocol in numbered {
                    out.extend((r.start.get()..=r.end.get()).map(|port| ProbeCol {
                        probe: Probe { protocol, port },
                        name: None,
                    }));
                }
            }
            PortArg::Named(name) => {
                let found: BTreeSet<(u16, Protocol)> = dests
                    .iter()
                    .flat_map(|&p| &engine.cluster().pods[p].ports)
                    .filter(|cp| cp.name.as_deref() == Some(name.as_str()))
                    .filter(|cp| protocols.is_empty() || protocols.contains(&cp.protocol))
                    .map(|cp| (cp.port.get(), cp.protocol))
                    .collect();
                if found.is_empty() {
                    return Err(CliError::Usage(format!(
                        "--ports {name}: no destination shown declares a container port of that name"
                    )));
                }
                out.extend(found.into_iter().map(|(port, protocol)| ProbeCol {
                    probe: Probe { protocol, port },
                    name: Some(name.clone()),
                }));
            }
        }
    }
    if out.len() > MAX_PROBES {
        return Err(CliError::Usage(format!(
            "{} probes asked; at most {MAX_PROBES}",
            out.len()
        )));
    }
    Ok(out)
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

/// Evaluates every probe between every pair of pods and prints it.
pub fn run(args: Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let analysis = Analysis::new(&engine);
    let staged = &engine.cluster().staged;
    let n = staged.network_policies.len() + staged.admin_policies.len();
    if n > 0 {
        eprintln!(
            "note: {n} staged polic{} not enforced in this matrix; `palisade diff --staged` lists the connections enforcing {} would change",
            if n == 1 { "y is" } else { "ies are" },
            if n == 1 { "it" } else { "them" }
        );
    }
    // The matrix rows are the addressable pods in this order, whatever the probes: focus
    // first, so that a port name resolves against the destinations shown only.
    let order: Vec<PodId> = analysis.addressable_pod_ids();
    if order.is_empty() {
        return Err(CliError::Empty(
            "no pod in the input has an address (status.podIP/podIPs) and no workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) stands for one, so the matrix would be empty; dump the pods with `kubectl get pods -A -o yaml`".into(),
        ));
    }
    if args.services {
        return services::run(&args, &engine, &order);
    }
    let pods = &engine.cluster().pods;
    let names: Vec<String> = order.par_iter().map(|&p| pods[p].key()).collect();
    let keys: Vec<(&str, &str)> = order
        .iter()
        .map(|&p| (pods[p].namespace.as_str(), pods[p].name.as_str()))
        .collect();
    let (rows, cols_idx) = args.focus.select(&keys)?;
    let dests: Vec<PodId> = cols_idx.iter().map(|&c| order[c]).collect();
    let cols = probe_cols(&engine, &dests, &args.ports, &args.protocols)?;
    let probes: Vec<Probe> = cols.iter().map(|c| c.probe).collect();
    let m = analysis.matrix_of(order, &probes);
    let allowed = |p: usize, f: usize, t: usize| m.allowed(p, f, t);
    let applies = |p: usize, t: usize| match &cols[p].name {
        None => true,
        Some(name) => pods[m.pods[t]].ports.iter().any(|cp| {
            cp.name.as_deref() == Some(name.as_str())
                && cp.port.get() == cols[p].probe.port
                && cp.protocol == cols[p].probe.protocol
        }),
    };
    let workloads = m
        .pods
        .iter()
        .any(|&p| palisade_model::workload_of(&pods[p]).is_some());
    let depends = |p: usize, f: usize, t: usize| {
        workloads
            && analysis
                .pod_flow(m.pods[f], m.pods[t], cols[p].probe)
                .is_some_and(|flow| engine.depends_on_address(&flow))
    };
    let v = View {
        names: &names,
        rows,
        cols: cols_idx,
        probes: cols.clone(),
        allowed: &allowed,
        applies: &applies,
        depends: &depends,
    };
    if args.output == Format::Table
        && !args.force
        && (v.rows.len() > MAX_ENDPOINTS || v.cols.len() > MAX_ENDPOINTS)
    {
        return Err(CliError::Usage(format!(
            "{} sources x {} destinations is too wide to read as a table (more than {MAX_ENDPOINTS}); use -o summary or -o html, focus with --from/--to/--namespace, or add --force",
            v.rows.len(),
            v.cols.len()
        )));
    }
    let stdout = std::io::stdout();
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    match args.output {
        Format::Table => table(&mut anstream::AutoStream::auto(stdout.lock()), &v)?,
        Format::Json => view::json(&mut buffered, &v)?,
        Format::Jsonl => view::jsonl(&mut buffered, &v)?,
        Format::Csv => view::csv(&mut buffered, &v)?,
        Format::Md => view::md(&mut buffered, &v)?,
        Format::Summary => summary::summary(&mut buffered, &engine, &m, &v)?,
        Format::Dot => dot::dot(&mut buffered, &engine, &m, &v)?,
        Format::Html => html::html(&mut buffered, &engine, &m, &v)?,
    }
    // The process ends after this command: freeing the cluster object by object would
    // cost a tenth of a second at 100,000 pods, and the system reclaims it all at once.
    std::mem::forget(m);
    std::mem::forget(engine);
    Ok(())
}

/// Prints a grid in one of the row formats (table, json, jsonl, csv, md).
pub fn print(format: GridFormat, g: &Grid<'_>) -> Result<(), CliError> {
    let all: Vec<usize> = (0..g.names.len()).collect();
    let allowed = |p: usize, f: usize, t: usize| (g.allowed)(p, f, t);
    let applies = |_: usize, _: usize| true;
    let depends = |_: usize, _: usize, _: usize| false;
    let v = View {
        names: &g.names,
        rows: all.clone(),
        cols: all,
        probes: g
            .probes
            .iter()
            .map(|&probe| ProbeCol { probe, name: None })
            .collect(),
        allowed: &allowed,
        applies: &applies,
        depends: &depends,
    };
    let stdout = std::io::stdout();
    match format {
        GridFormat::Table => table(&mut anstream::AutoStream::auto(stdout.lock()), &v)?,
        GridFormat::Jsonl => view::jsonl(&mut std::io::BufWriter::new(stdout.lock()), &v)?,
        GridFormat::Json => view::json(&mut std::io::BufWriter::new(stdout.lock()), &v)?,
        GridFormat::Csv => view::csv(&mut std::io::BufWriter::new(stdout.lock()), &v)?,
        GridFormat::Md => view::md(&mut std::io::BufWriter::new(stdout.lock()), &v)?,
    }
    Ok(())
}
