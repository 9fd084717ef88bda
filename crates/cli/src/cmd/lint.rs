//! `palisade lint`.

use std::io::Write;

use palisade_engine::lint::{self, Code, FieldLines, Finding, Severity};
use palisade_engine::{Engine, Options, Semantics};
use palisade_model::LoadOptions;

use crate::common::{Input, SemanticsArg};
use crate::error::CliError;

/// Arguments of `lint`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    input: Input,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    output: Format,
    /// Exit 3 when a finding of this severity or worse is reported (for CI).
    #[arg(long, value_enum)]
    fail_on: Option<Level>,
    /// Only the findings about this namespace's NetworkPolicies (the developer view).
    #[arg(long)]
    namespace: Option<String>,
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
    let findings = findings(&args)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match args.output {
        Format::Text => text(&mut out, &findings)?,
        Format::Json => {
            let count = |s| findings.iter().filter(|f| f.severity == s).count();
            let doc = serde_json::json!({
                "findings": findings,
                "summary": {
                    "error": count(Severity::Error),
                    "warning": count(Severity::Warning),
                    "info": count(Severity::Info),
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
            .filter(|f| f.severity >= level.severity())
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
        LoadOptions { skip_invalid: true },
    )?;
    let mut findings = Vec::new();
    for d in &loaded.diagnostics {
        match d.severity {
            palisade_model::Severity::Notice => eprintln!("{d}"),
            _ => findings.push(Finding::from_diagnostic(d)),
        }
    }
    let options = Options {
        semantics: match args.input.semantics {
            SemanticsArg::Standard => Semantics::Standard,
            SemanticsArg::Legacy => Semantics::Legacy,
        },
        allow_node_local: !args.input.no_node_local,
    };
    let engine = Engine::new(loaded.cluster, options);
    findings.extend(engine.lint());
    // Engine findings, and some of the loader's, carry the object's line: move each to
    // its field's line.
    FieldLines::new(sources.iter().map(|(n, t)| (n.as_str(), t.as_str()))).refine(&mut findings);
    if let Some(ns) = &args.namespace {
        // Invalid objects make the whole input invalid: they stay.
        findings.retain(|f| f.namespace.as_ref() == Some(ns) || f.code == Code::InvalidObject);
    }
    lint::sort(&mut findings);
    Ok(findings)
}

fn text(out: &mut impl Write, findings: &[Finding]) -> std::io::Result<()> {
    for f in findings {
        writeln!(out, "{f}")?;
    }
    let count = |s| findings.iter().filter(|f| f.severity == s).count();
    writeln!(
        out,
        "{} finding(s): {} error(s), {} warning(s), {} info",
        findings.len(),
        count(Severity::Error),
        count(Severity::Warning),
        count(Severity::Info)
    )
}
