//! Findings as a SARIF 2.1.0 log (the OASIS Static Analysis Results Interchange Format),
//! which code-scanning interfaces read to show each finding on its line.

use serde::Serialize;

use super::{Code, Finding, Severity};

/// A SARIF log with one run.
#[derive(Debug, Serialize)]
pub struct SarifLog {
    #[serde(rename = "$schema")]
    schema: &'static str,
    version: &'static str,
    runs: [Run; 1],
}

#[derive(Debug, Serialize)]
struct Run {
    tool: Tool,
    results: Vec<SarifResult>,
}

#[derive(Debug, Serialize)]
struct Tool {
    driver: Driver,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Driver {
    name: &'static str,
    version: String,
    rules: Vec<Rule>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    id: &'static str,
    name: &'static str,
    short_description: Text,
    help_uri: String,
    default_configuration: Configuration,
}

#[derive(Debug, Serialize)]
struct Configuration {
    level: &'static str,
}

#[derive(Debug, Serialize)]
struct Text {
    text: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SarifResult {
    rule_id: &'static str,
    rule_index: usize,
    level: &'static str,
    message: Text,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    locations: Vec<Location>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    suppressions: Vec<SarifSuppression>,
    properties: Properties,
}

/// The fix, apart from the message (SARIF's own `fixes` need file edits).
#[derive(Debug, Serialize)]
struct Properties {
    fix: String,
}

#[derive(Debug, Serialize)]
struct SarifSuppression {
    /// `inSource` (the annotation) or `external` (the baseline).
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    justification: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Location {
    #[serde(skip_serializing_if = "Option::is_none")]
    physical_location: Option<Physical>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    logical_locations: Vec<Logical>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Physical {
    artifact_location: Artifact,
    #[serde(skip_serializing_if = "Option::is_none")]
    region: Option<Region>,
}

#[derive(Debug, Serialize)]
struct Artifact {
    uri: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Region {
    start_line: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Logical {
    fully_qualified_name: String,
    kind: &'static str,
}

/// SARIF's level for a severity (`note` for info).
fn level(s: Severity) -> &'static str {
    match s {
        Severity::Info => "note",
        Severity::Warning => "warning",
        Severity::Error => "error",
    }
}

/// Where each code is documented: this page, at the code's heading.
pub const LINT_DOCS: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/blob/main/docs/lint.md");

/// The documentation of a code: `…/docs/lint.md#pal002-overridden-rule`.
pub fn help_uri(c: Code) -> String {
    format!("{LINT_DOCS}#{}-{}", c.id().to_ascii_lowercase(), c.name())
}

/// The SARIF 2.1.0 log of `findings`, from the tool at `version`. Every code is listed as
/// a rule with its documentation; each result has the message, and the fix apart (in its
/// properties), at its file and line; suppressed findings carry their suppression.
pub fn sarif(findings: &[Finding], version: &str) -> SarifLog {
    let rules = Code::ALL
        .iter()
        .map(|c| Rule {
            id: c.id(),
            name: c.name(),
            short_description: Text {
                text: c.summary().to_string(),
            },
            help_uri: help_uri(*c),
            default_configuration: Configuration {
                level: level(c.severity()),
            },
        })
        .collect();
    let results = findings
        .iter()
        .map(|f| {
            let physical = f.file.as_ref().map(|file| Physical {
                artifact_location: Artifact {
                    uri: file.to_string(),
                },
                region: (f.line > 0).then_some(Region { start_line: f.line }),
            });
            let logical: Vec<Logical> = (!f.object.is_empty())
                .then(|| Logical {
                    fully_qualified_name: if f.field.is_empty() {
                        f.object.clone()
                    } else {
                        format!("{}: {}", f.object, f.field)
                    },
                    kind: "object",
                })
                .into_iter()
                .collect();
            let locations = if physical.is_none() && logical.is_empty() {
                Vec::new()
            } else {
                vec![Location {
                    physical_location: physical,
                    logical_locations: logical,
                }]
            };
            SarifResult {
                rule_id: f.code.id(),
                rule_index: Code::ALL.iter().position(|c| *c == f.code).unwrap_or(0),
                level: level(f.severity),
                message: Text {
                    text: f.message.clone(),
                },
                locations,
                suppressions: f
                    .suppressed
                    .iter()
                    .map(|s| SarifSuppression {
                        kind: match s.by {
                            super::SuppressedBy::Annotation => "inSource",
                            super::SuppressedBy::Baseline => "external",
                        },
                        justification: s.reason.clone(),
                    })
                    .collect(),
                properties: Properties { fix: f.fix.clone() },
            }
        })
        .collect();
    SarifLog {
        schema: "https://json.schemastore.org/sarif-2.1.0.json",
        version: "2.1.0",
        runs: [Run {
            tool: Tool {
                driver: Driver {
                    name: "palisade",
                    version: version.to_string(),
                    rules,
                },
            },
            results,
        }],
    }
}
