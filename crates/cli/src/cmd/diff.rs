//! `palisade diff`.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;

use palisade_analysis::diff::{self, Diff, Filter};
use palisade_engine::Engine;
use palisade_model::{PortRange, Protocol};

use crate::common::{Input, parse_protocol};
use crate::error::CliError;
use crate::report::ports::PortArg;

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade diff -f cluster/ policies/ --to cluster/ new-policies/
  palisade diff -f cluster/ --staged -o md
  palisade diff -f old/ --to new/ --ports 1-1024,http --protocols TCP
  palisade diff -f cluster/ policies/ --base origin/main -o md

Every pod, node and outside address range, in every address family, on every port of
every protocol is compared. Exit status: 0 nothing changed anywhere, 3 something changed
(even outside --ports/--protocols), 1 invalid input, 2 usage error.")]
pub struct Args {
    /// The old state: `-f` (and the loading options) as for every analysis command.
    #[command(flatten)]
    input: Input,
    /// The new state: files or directories, read like `-f`.
    #[arg(long = "to", num_args = 1.., required_unless_present_any = ["staged", "base"], conflicts_with_all = ["staged", "base"])]
    to: Vec<PathBuf>,
    /// Compare the paths of `-f` at this git ref (branch, tag or commit; the old state)
    /// with the same paths in the working tree (the new state). The ref is checked out to
    /// a temporary worktree, removed afterwards; a path the ref does not have is empty there.
    #[arg(long, value_name = "GIT_REF", conflicts_with = "staged")]
    base: Option<String>,
    /// Compare the state of `-f` as enforced with the same state with its staged policies
    /// (annotated palisade.dev/staged: "true") enforced too.
    #[arg(long)]
    staged: bool,
    /// Report only changes on these ports (comma-separated numbers, ranges such as
    /// 1-1024, or container port names). The comparison itself covers every port; the exit
    /// status still says whether anything changed.
    #[arg(long, value_delimiter = ',')]
    ports: Vec<PortArg>,
    /// Report only changes over these protocols (comma-separated).
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
    if let Some(reference) = &args.base {
        let old = at_ref(&args.input, reference)?;
        let new = args.input.engine()?;
        return report(&args, &old, &new);
    }
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
    report(&args, &old, &new)
}

/// The old state of `--base`: the texts of the `-f` paths at `reference`.
fn at_ref(input: &Input, reference: &str) -> Result<Engine, CliError> {
    if input.is_kube() {
        return Err(CliError::Usage(
            "--base compares files of a git repository; it does not take --kube".into(),
        ));
    }
    if input.files.iter().any(|f| f.as_os_str() == "-") {
        return Err(CliError::Usage(
            "--base reads the -f paths at a git ref; standard input (-) has none".into(),
        ));
    }
    let checkout = crate::git::Checkout::new(reference)?;
    let mut texts = Vec::new();
    for path in &input.files {
        let (there, name) = checkout.locate(path)?;
        if !there.exists() {
            eprintln!("notice: {name} does not exist; its old state is empty");
            continue;
        }
        for (file, text) in palisade_model::read_paths(std::slice::from_ref(&there))? {
            // `REF:path/of/the/file`, the name diagnostics give it.
            let relative = std::path::Path::new(&file)
                .strip_prefix(&there)
                .ok()
                .filter(|r| !r.as_os_str().is_empty())
                .map(|r| format!("{name}/{}", r.display()))
                .unwrap_or_else(|| name.clone());
            texts.push((relative, text));
        }
    }
    input.engine_of_texts(&texts)
}

/// Prints what changes between `old` and `new`; exits 3 when something does.
fn report(args: &Args, old: &Engine, new: &Engine) -> Result<(), CliError> {
    let (old, new) = (old, new);
    let filter = filter(old, new, &args.ports, &args.protocols)?;
    let whole = diff::diff(old, new);
    let shown = whole.narrowed(&filter);
    // Some changed port is left out of the report.
    let ports = |d: &Diff| -> usize {
        d.groups
            .iter()
            .map(|g| usize::from(g.ports.end.get() - g.ports.start.get()) + 1)
            .sum()
    };
    let service_changes = |d: &Diff| d.services.as_ref().map_or(0, |s| s.changes.len());
    let hidden = ports(&shown) < ports(&whole) || service_changes(&shown) < service_changes(&whole);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        Format::Text => text(&mut out, &shown, hidden)?,
        Format::Md => md(&mut out, &shown, hidden)?,
        Format::Jsonl => jsonl(&mut out, &shown)?,
        Format::Json => json(&mut out, &shown, &whole)?,
    }
    out.flush()?;
    if whole.is_empty() {
        Ok(())
    } else {
        Err(CliError::Differs)
    }
}

/// `--ports` and `--protocols` as a filter: numbers and ranges as given, a name as every
/// (protocol, number) a pod of either state gives it.
fn filter(
    old: &Engine,
    new: &Engine,
    ports: &[PortArg],
    protocols: &[Protocol],
) -> Result<Filter, CliError> {
    let mut ranges = Vec::new();
    let mut named_protocols = BTreeSet::new();
    for arg in ports {
        match arg {
            PortArg::Number(p) => ranges.push(PortRange::single(*p)),
            PortArg::Range(r) => ranges.push(*r),
            PortArg::Named(name) => {
                let found: BTreeSet<(u16, Protocol)> = [old, new]
                    .iter()
                    .flat_map(|e| &e.cluster().pods)
                    .flat_map(|p| &p.ports)
                    .filter(|cp| cp.name.as_deref() == Some(name.as_str()))
                    .filter(|cp| protocols.is_empty() || protocols.contains(&cp.protocol))
                    .map(|cp| (cp.port.get(), cp.protocol))
                    .collect();
                if found.is_empty() {
                    return Err(CliError::Usage(format!(
                        "--ports {name}: no pod of either state declares a container port of that name"
                    )));
                }
                for (port, protocol) in found {
                    named_protocols.insert(protocol);
                    if let Some(p) = palisade_model::Port::new(i64::from(port)) {
                        ranges.push(PortRange::single(p));
                    }
                }
            }
        }
    }
    // Numbers without --protocols mean TCP, as for `matrix`; names bring their protocols.
    let numbered = ports.iter().any(|p| !matches!(p, PortArg::Named(_)));
    let protocols = match (protocols.is_empty(), ports.is_empty()) {
        (false, _) => protocols.to_vec(),
        (true, true) => Vec::new(),
        (true, false) => {
            if numbered {
                named_protocols.insert(Protocol::Tcp);
            }
            named_protocols.into_iter().collect()
        }
    };
    Ok(Filter {
        protocols,
        ports: ranges,
    })
}

/// `1,480 pod(s)…`: what was compared, for the summary line.
fn scope(d: &Diff) -> String {
    let (mut pods, mut nodes, mut outside) = (0, 0, 0);
    for a in &d.actors {
        match a {
            diff::Actor::Pod { .. } => pods += 1,
            diff::Actor::Node { .. } => nodes += 1,
            diff::Actor::Outside(_) => outside += 1,
        }
    }
    let families: Vec<&str> = d.families.iter().map(|f| f.as_str()).collect();
    format!(
        "{pods} pod(s), {nodes} node(s), {outside} outside address range(s); every port of TCP, UDP and SCTP; {}",
        if families.is_empty() {
            "no address".to_string()
        } else {
            families.join(" and ")
        }
    )
}

fn text(out: &mut impl Write, d: &Diff, hidden: bool) -> std::io::Result<()> {
    let mut section: Option<(diff::ChangeKind, String)> = None;
    for l in d.lines() {
        let key = (l.change, l.after.clone());
        if section.as_ref() != Some(&key) {
            writeln!(out, "{}: {}", l.change.as_str(), l.after)?;
            section = Some(key);
        }
        writeln!(
            out,
            "  {} -> {} on {} ({} pair(s))",
            d.describe(&l.from),
            d.describe(&l.to),
            d.ports_text(&l.ports),
            l.pairs
        )?;
        writeln!(out, "    before: {}", l.before)?;
    }
    pods_lines(out, d)?;
    service_lines(out, d)?;
    let (gained, lost) = d.counts();
    if hidden {
        writeln!(
            out,
            "more changes on other ports or protocols are not shown (--ports/--protocols)"
        )?;
    }
    if d.is_empty() {
        writeln!(out, "no change over {}", scope(d))
    } else {
        writeln!(
            out,
            "{gained} pair(s) gained and {lost} lost a connection over {}{}",
            scope(d),
            service_count(d)
        )
    }
}

/// `; 2 Service reach change(s)` when a state has Services.
fn service_count(d: &Diff) -> String {
    d.services
        .as_ref()
        .map(|s| format!("; {} Service reach change(s)", s.changes.len()))
        .unwrap_or_default()
}

/// `svc/NS/NAME:PORT TCP 80 (IPv6)`: a Service port as a change names it.
fn service_port(d: &Diff, c: &diff::ServiceChange) -> String {
    let family = if d.families.len() > 1 {
        format!(" ({})", c.family.as_str())
    } else {
        String::new()
    };
    format!(
        "svc/{}:{} {} {}{family}",
        c.service,
        c.port,
        c.protocol.as_str(),
        c.number
    )
}

/// `all (3)`, or `absent` when the Service, port or source is not there.
fn reached(r: Option<&diff::Reached>) -> String {
    r.map_or_else(|| "absent".to_string(), diff::Reached::summary)
}

/// One line per Service reach change, then the Services added and removed.
fn service_lines(out: &mut impl Write, d: &Diff) -> std::io::Result<()> {
    let Some(s) = &d.services else {
        return Ok(());
    };
    for c in &s.changes {
        writeln!(
            out,
            "service reach {}: {} -> {}",
            c.kind(),
            d.describe(&c.from),
            service_port(d, c)
        )?;
        writeln!(
            out,
            "    before: {}; after: {}",
            reached(c.before.as_ref()),
            reached(c.after.as_ref())
        )?;
    }
    if !s.added.is_empty() {
        writeln!(out, "services added: {}", s.added.join(", "))?;
    }
    if !s.removed.is_empty() {
        writeln!(out, "services removed: {}", s.removed.join(", "))?;
    }
    Ok(())
}

fn pods_lines(out: &mut impl Write, d: &Diff) -> std::io::Result<()> {
    if !d.pods_added.is_empty() {
        writeln!(out, "pods added: {}", d.pods_added.join(", "))?;
    }
    if !d.pods_removed.is_empty() {
        writeln!(out, "pods removed: {}", d.pods_removed.join(", "))?;
    }
    if !d.nodes_added.is_empty() {
        writeln!(out, "nodes added: {}", d.nodes_added.join(", "))?;
    }
    if !d.nodes_removed.is_empty() {
        writeln!(out, "nodes removed: {}", d.nodes_removed.join(", "))?;
    }
    Ok(())
}

fn md(out: &mut impl Write, d: &Diff, hidden: bool) -> std::io::Result<()> {
    let (gained, lost) = d.counts();
    writeln!(
        out,
        "**{gained}** pair(s) gained and **{lost}** lost a connection over {}{}.\n",
        scope(d),
        service_count(d)
    )?;
    if hidden {
        writeln!(
            out,
            "More changes on other ports or protocols are not shown.\n"
        )?;
    }
    let cell = |s: &str| s.replace('|', "\\|");
    let mut section: Option<(diff::ChangeKind, String)> = None;
    for l in d.lines() {
        let key = (l.change, l.after.clone());
        if section.as_ref() != Some(&key) {
            if section.is_some() {
                writeln!(out)?;
            }
            writeln!(out, "### {}: {}\n", l.change.as_str(), cell(&l.after))?;
            writeln!(out, "| from | to | ports | pairs | before |")?;
            writeln!(out, "|---|---|---|---|---|")?;
            section = Some(key);
        }
        writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&d.describe(&l.from)),
            cell(&d.describe(&l.to)),
            d.ports_text(&l.ports),
            l.pairs,
            cell(&l.before)
        )?;
    }
    if !d.pods_added.is_empty()
        || !d.pods_removed.is_empty()
        || !d.nodes_added.is_empty()
        || !d.nodes_removed.is_empty()
    {
        writeln!(out)?;
        pods_lines(out, d)?;
    }
    if let Some(s) = d.services.as_ref().filter(|s| !s.is_empty()) {
        writeln!(out, "\n### Services\n")?;
        writeln!(out, "| change | from | Service port | before | after |")?;
        writeln!(out, "|---|---|---|---|---|")?;
        for c in &s.changes {
            writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                c.kind(),
                cell(&d.describe(&c.from)),
                service_port(d, c),
                reached(c.before.as_ref()),
                reached(c.after.as_ref())
            )?;
        }
        if !s.added.is_empty() || !s.removed.is_empty() {
            writeln!(out)?;
        }
        if !s.added.is_empty() {
            writeln!(out, "services added: {}", s.added.join(", "))?;
        }
        if !s.removed.is_empty() {
            writeln!(out, "services removed: {}", s.removed.join(", "))?;
        }
    }
    Ok(())
}

/// A Service reach as JSON: `{"reach":"some","allowed":[...],"total":3}`, or null.
fn reached_json(r: Option<&diff::Reached>) -> serde_json::Value {
    r.map_or(
        serde_json::Value::Null,
        |r| serde_json::json!({"reach": r.reach.as_str(), "allowed": r.allowed, "total": r.total}),
    )
}

fn jsonl(out: &mut impl Write, d: &Diff) -> Result<(), CliError> {
    for (g, a, b) in d.changes() {
        let mut line = serde_json::json!({
            "from": a.name(),
            "to": b.name(),
            "family": g.family.as_str(),
            "protocol": g.protocol.as_str(),
            "ports": g.ports.to_string(),
            "allowed": g.change == diff::ChangeKind::Gained,
            "change": g.change.as_str(),
            "before": g.before.as_deref(),
            "after": g.after.as_deref(),
        });
        if g.ports.start == g.ports.end {
            line["port"] = g.ports.start.get().into();
        }
        writeln!(out, "{line}")?;
    }
    for c in d.services.iter().flat_map(|s| &s.changes) {
        for &a in &c.from {
            let line = serde_json::json!({
                "from": d.actors[a].name(),
                "to": format!("svc/{}:{}", c.service, c.port),
                "family": c.family.as_str(),
                "protocol": c.protocol.as_str(),
                "port": c.number,
                "change": c.kind(),
                "before": reached_json(c.before.as_ref()),
                "after": reached_json(c.after.as_ref()),
            });
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

fn json(out: &mut impl Write, d: &Diff, whole: &Diff) -> Result<(), CliError> {
    let (gained, lost) = d.counts();
    let names =
        |actors: &[usize]| -> Vec<String> { actors.iter().map(|&a| d.actors[a].name()).collect() };
    let changes: Vec<serde_json::Value> = d
        .groups
        .iter()
        .map(|g| {
            let c = &d.cells[g.cell];
            serde_json::json!({
                "change": g.change.as_str(),
                "family": g.family.as_str(),
                "protocol": g.protocol.as_str(),
                "ports": g.ports.to_string(),
                "from": names(&c.from),
                "to": names(&c.to),
                "pairs": c.pairs,
                "before": g.before.as_deref(),
                "after": g.after.as_deref(),
            })
        })
        .collect();
    let mut doc = serde_json::json!({
        "same": whole.is_empty(),
        "gained": gained,
        "lost": lost,
        "podsAdded": d.pods_added,
        "podsRemoved": d.pods_removed,
        "nodesAdded": d.nodes_added,
        "nodesRemoved": d.nodes_removed,
        "changes": changes,
    });
    if let Some(s) = &d.services {
        let changes: Vec<serde_json::Value> = s
            .changes
            .iter()
            .map(|c| {
                serde_json::json!({
                    "change": c.kind(),
                    "service": c.service,
                    "port": c.port,
                    "number": c.number,
                    "protocol": c.protocol.as_str(),
                    "family": c.family.as_str(),
                    "from": names(&c.from),
                    "before": reached_json(c.before.as_ref()),
                    "after": reached_json(c.after.as_ref()),
                })
            })
            .collect();
        doc["services"] = serde_json::json!({
            "added": s.added,
            "removed": s.removed,
            "changes": changes,
        });
    }
    writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}
