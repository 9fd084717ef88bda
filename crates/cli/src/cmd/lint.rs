//! `palisade lint`.

use std::io::Write;
use std::path::PathBuf;

use palisade_analysis::Analysis;
use palisade_analysis::lint::{self, Baseline, Code, Finding, ObjectLines, Severity, SuppressedBy};
use palisade_engine::Engine;
use palisade_model::LoadOptions;

use crate::common::Input;
use crate::error::CliError;

/// Arguments of `lint`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  palisade lint -f cluster/ policies/
  palisade lint -f cluster/ policies/ --fail-on warning -o sarif > lint.sarif
  palisade lint -f cluster/ policies/ --write-baseline lint-baseline.json
  palisade lint -f cluster/ policies/ --baseline lint-baseline.json --fail-on warning
  palisade lint -f cluster/ policies/ --namespace shop,payments

A policy annotated palisade.dev/lint-ignore: \"PAL005: defence in depth\" has those codes
suppressed (the text after the colon is the reason, kept in the output). Suppressed
findings, and those in the --baseline file, do not count for --fail-on.")]
pub struct Args {
    #[command(flatten)]
    input: Input,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
    /// Exit 3 when a finding of this severity or worse is reported (for CI).
    #[arg(long, value_enum)]
    fail_on: Option<Level>,
    /// Only the findings about these namespaces' NetworkPolicies (comma-separated; the
    /// developer view).
    #[arg(long, value_delimiter = ',')]
    namespace: Vec<String>,
    /// Findings recorded in this file (by --write-baseline) are accepted: only new ones
    /// count for --fail-on.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Write the current findings (not already suppressed) to this file, to accept them
    /// with --baseline.
    #[arg(long, value_name = "FILE")]
    write_baseline: Option<PathBuf>,
}

/// `lint` output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Format {
    /// One finding per paragraph: `file:line: severity[code]: object: field: message`, then the fix.
    Text,
    /// `{"findings": [...], "summary": {...}}`.
    Json,
    /// A SARIF 2.1.0 log, for code-scanning interfaces.
    Sarif,
}

/// `--fail-on` levels.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Level {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warning,
    /// Every finding.
    Info,
}

impl Level {
    fn severity(self) -> Severity {
        match self {
            Level::Error => Severity::Error,
            Level::Warning => Severity::Warning,
            Level::Info => Severity::Info,
        }
    }
}

/// Loads the input (invalid objects become findings), lints it and prints the findings.
pub fn run(args: Args) -> Result<(), CliError> {
    let mut findings = findings(&args)?;
    if let Some(path) = &args.baseline {
        let text = std::fs::read_to_string(path).map_err(CliError::file(path))?;
        let baseline = Baseline::parse(&text).map_err(|message| CliError::Baseline {
            path: path.clone(),
            message,
        })?;
        baseline.apply(&mut findings);
    }
    if let Some(path) = &args.write_baseline {
        let b = Baseline::of(&findings);
        let text = serde_json::to_string_pretty(&b.to_json())? + "\n";
        std::fs::write(path, text).map_err(CliError::file(path))?;
        eprintln!(
            "palisade: wrote {} finding(s) to the baseline {}",
            b.len(),
            path.display()
        );
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        Format::Text => text(&mut out, &findings)?,
        Format::Json => {
            let count = |s| {
                findings
                    .iter()
                    .filter(|f| f.severity == s && f.suppressed.is_none())
                    .count()
            };
            let suppressed = findings.iter().filter(|f| f.suppressed.is_some()).count();
            let doc = serde_json::json!({
                "findings": findings,
                "summary": {
                    "error": count(Severity::Error),
                    "warning": count(Severity::Warning),
                    "info": count(Severity::Info),
                    "suppressed": suppressed,
                },
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        }
        Format::Sarif => {
            let log = lint::sarif(&findings, env!("CARGO_PKG_VERSION"));
            writeln!(out, "{}", serde_json::to_string_pretty(&log)?)?;
        }
    }
    out.flush()?;
    let invalid = findings
        .iter()
        .filter(|f| f.code == Code::InvalidObject)
        .count();
    if invalid > 0 {
        return Err(CliError::LintInvalid(invalid));
    }
    if let Some(level) = args.fail_on {
        let n = findings
            .iter()
            .filter(|f| f.severity >= level.severity() && f.suppressed.is_none())
            .count();
        if n > 0 {
            return Err(CliError::Findings(n, level.severity().as_str()));
        }
    }
    Ok(())
}

/// The loader's diagnostics and the engine's findings, each at its field's line.
fn findings(args: &Args) -> Result<Vec<Finding>, CliError> {
    let sources = args.input.texts()?;
    let loaded = palisade_model::load_sources(
        sources.iter().map(|(n, t)| (n.as_str(), t.as_str())),
        LoadOptions {
            skip_invalid: true,
            field_lines: true,
        },
    )?;
    let mut findings = Vec::new();
    for d in &loaded.diagnostics {
        match d.severity {
            palisade_model::Severity::Notice => crate::common::once(&d.to_string()),
            _ => findings.push(Finding::from_diagnostic(d)),
        }
    }
    let mut cluster = loaded.cluster;
    cluster.dns = args.input.dns_map()?.map(std::sync::Arc::new);
    let engine = Engine::new(cluster, args.input.options());
    findings.extend(Analysis::new(&engine).lint());
    // Engine findings, and some of the loader's, carry the object's line: suppress those
    // of annotated objects, then move each to its field's line.
    let lines = ObjectLines::new(engine.cluster(), &loaded.set_aside);
    let unreadable = lint::suppress_annotated(&mut findings, &lines);
    findings.extend(unreadable);
    lines.refine(&mut findings);
    if !args.namespace.is_empty() {
        // Invalid objects make the whole input invalid: they stay.
        findings.retain(|f| {
            f.namespace
                .as_ref()
                .is_some_and(|n| args.namespace.contains(n))
                || f.code == Code::InvalidObject
        });
    }
    lint::sort(&mut findings);
    Ok(findings)
}

fn text(out: &mut impl Write, findings: &[Finding]) -> std::io::Result<()> {
    let (shown, suppressed): (Vec<&Finding>, Vec<&Finding>) =
        findings.iter().partition(|f| f.suppressed.is_none());
    for f in &shown {
        writeln!(out, "{f}")?;
    }
    // Suppressed by an annotation: one line each, with the reason; by the baseline: a count.
    let mut baseline = 0;
    for f in &suppressed {
        match f.suppressed.as_ref().map(|s| (s.by, &s.reason)) {
            Some((SuppressedBy::Annotation, reason)) => writeln!(
                out,
                "suppressed by annotation: {}:{}: {}: {}{}{}",
                f.file.as_deref().unwrap_or("-"),
                f.line,
                f.code.id(),
                f.object,
                if f.field.is_empty() {
                    String::new()
                } else {
                    format!(": {}", f.field)
                },
                reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )?,
            _ => baseline += 1,
        }
    }
    let count = |s| shown.iter().filter(|f| f.severity == s).count();
    write!(
        out,
        "{} finding(s): {} error(s), {} warning(s), {} info",
        shown.len(),
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info)
    )?;
    if !suppressed.is_empty() {
        write!(
            out,
            "; {} suppressed ({} by annotation, {baseline} by the baseline)",
            suppressed.len(),
            suppressed.len() - baseline
        )?;
    }
    writeln!(out)
}
