//! Findings people have accepted: the [`IGNORE_ANNOTATION`] on a policy, and a baseline of
//! findings recorded earlier. A suppressed finding stays in the output, marked with what
//! suppressed it and why, and does not count for `--fail-on`. Invalid objects (PAL000)
//! cannot be suppressed.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};

use super::{Code, Finding, ObjectLines};

/// `palisade.dev/lint-ignore: "PAL002,PAL008"` on a policy suppresses those codes for it;
/// text after a colon is the reason (`"PAL005: defence in depth"`).
pub const IGNORE_ANNOTATION: &str = palisade_model::LINT_IGNORE_ANNOTATION;

/// What suppressed a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SuppressedBy {
    /// The [`IGNORE_ANNOTATION`] of the object.
    Annotation,
    /// The baseline file.
    Baseline,
}

/// Why a finding does not count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Suppression {
    /// The annotation or the baseline.
    pub by: SuppressedBy,
    /// The reason the annotation gives, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The codes and reason of one annotation value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignore {
    /// The codes suppressed.
    pub codes: Vec<Code>,
    /// The text after the first colon, trimmed, if not empty.
    pub reason: Option<String>,
}

impl Ignore {
    /// Reads `"PAL002, empty-peer: reason"`; an unknown code is an error.
    pub fn parse(value: &str) -> Result<Ignore, String> {
        let (codes, reason) = match value.split_once(':') {
            Some((c, r)) => (c, Some(r.trim()).filter(|r| !r.is_empty())),
            None => (value, None),
        };
        let codes = codes
            .split([',', ' '])
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(|c| {
                Code::parse(c).ok_or_else(|| {
                    format!("{c:?} is not a lint code (PAL001…, or a name such as redundant-rule)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if codes.is_empty() {
            return Err(
                "no lint code given; write the codes to ignore, such as \"PAL002,PAL008\"".into(),
            );
        }
        Ok(Ignore {
            codes,
            reason: reason.map(str::to_string),
        })
    }
}

/// Marks the findings about objects whose annotation names their code as suppressed; run
/// it before [`ObjectLines::refine`] (findings still carry their object's line). Returns a
/// finding for each annotation that cannot be read.
pub fn suppress_annotated(findings: &mut [Finding], lines: &ObjectLines<'_>) -> Vec<Finding> {
    for f in findings.iter_mut() {
        if f.code == Code::InvalidObject || f.suppressed.is_some() {
            continue;
        }
        let Some(value) = f
            .file
            .as_deref()
            .and_then(|file| lines.ignore_of(file, f.line))
        else {
            continue;
        };
        if let Ok(ignore) = Ignore::parse(value)
            && ignore.codes.contains(&f.code)
        {
            f.suppressed = Some(Suppression {
                by: SuppressedBy::Annotation,
                reason: ignore.reason,
            });
        }
    }
    let mut bad: Vec<Finding> = lines
        .ignores()
        .filter_map(|(file, line, value)| {
            let e = Ignore::parse(value).err()?;
            let origin = palisade_model::Origin {
                file: file.into(),
                line,
                fields: None,
            };
            Some(
                Finding::at(
                    Code::SuspiciousInput,
                    String::new(),
                    Some(&origin),
                    format!("metadata.annotations[{IGNORE_ANNOTATION}]"),
                )
                .says(
                    e,
                    "write the codes to ignore, comma-separated, then optionally a colon and the reason",
                ),
            )
        })
        .collect();
    super::sort(&mut bad);
    bad
}

/// Findings accepted earlier: each by code, object and field (not line or message, which
/// move with unrelated edits).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    entries: BTreeSet<(String, String, String)>,
}

impl Baseline {
    /// The findings to accept: every one not already suppressed, invalid objects excepted.
    pub fn of(findings: &[Finding]) -> Baseline {
        Baseline {
            entries: findings
                .iter()
                .filter(|f| f.suppressed.is_none() && f.code != Code::InvalidObject)
                .map(key)
                .collect(),
        }
    }

    /// How many findings it accepts.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it accepts nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `{"version": 1, "findings": [{"code", "object", "field"}, …]}`.
    pub fn to_json(&self) -> Value {
        let findings: Vec<Value> = self
            .entries
            .iter()
            .map(|(code, object, field)| json!({"code": code, "object": object, "field": field}))
            .collect();
        json!({"version": 1, "findings": findings})
    }

    /// Reads what [`Baseline::to_json`] writes; says what is wrong otherwise.
    pub fn parse(text: &str) -> Result<Baseline, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        if v.get("version").and_then(Value::as_u64) != Some(1) {
            return Err("\"version\" must be 1".into());
        }
        let items = v
            .get("findings")
            .and_then(Value::as_array)
            .ok_or("\"findings\" must be a list")?;
        let mut entries = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let field = |name: &str| {
                item.get(name)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| format!("findings[{i}].{name}: a string is required"))
            };
            let code = field("code")?;
            if Code::parse(&code).is_none() {
                return Err(format!("findings[{i}].code: {code:?} is not a lint code"));
            }
            entries.insert((code, field("object")?, field("field")?));
        }
        Ok(Baseline { entries })
    }

    /// Marks the findings it holds as suppressed.
    pub fn apply(&self, findings: &mut [Finding]) {
        for f in findings
            .iter_mut()
            .filter(|f| f.suppressed.is_none() && f.code != Code::InvalidObject)
        {
            if self.entries.contains(&key(f)) {
                f.suppressed = Some(Suppression {
                    by: SuppressedBy::Baseline,
                    reason: None,
                });
            }
        }
    }
}

fn key(f: &Finding) -> (String, String, String) {
    (f.code.id().to_string(), f.object.clone(), f.field.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_values() {
        type Row<'a> = (&'a str, Result<(Vec<Code>, Option<&'a str>), ()>, &'a str);
        let rows: [Row<'_>; 5] = [
            (
                "PAL002,PAL008",
                Ok((vec![Code::OverriddenRule, Code::EmptyPeer], None)),
                "ids",
            ),
            (
                "redundant-rule: defence in depth",
                Ok((vec![Code::RedundantRule], Some("defence in depth"))),
                "a name and a reason",
            ),
            (
                "PAL005 , PAL004:",
                Ok((vec![Code::RedundantRule, Code::ShadowedRule], None)),
                "spaces, empty reason",
            ),
            ("PAL999", Err(()), "an unknown code"),
            (": why", Err(()), "no code"),
        ];
        for (value, want, why) in rows {
            let got = Ignore::parse(value)
                .map(|i| (i.codes, i.reason))
                .map_err(|_| ());
            let want = want.map(|(c, r)| (c, r.map(str::to_string)));
            assert_eq!(got, want, "{why}");
        }
    }

    #[test]
    fn a_baseline_reads_what_it_writes_and_refuses_the_rest() {
        let f = Finding::at(
            Code::RedundantRule,
            "NetworkPolicy x/a".into(),
            None,
            "spec.ingress[1]".into(),
        );
        let b = Baseline::of(std::slice::from_ref(&f));
        assert_eq!(Baseline::parse(&b.to_json().to_string()), Ok(b.clone()));
        let mut found = vec![f];
        b.apply(&mut found);
        assert_eq!(
            found[0].suppressed.as_ref().map(|s| s.by),
            Some(SuppressedBy::Baseline)
        );
        for bad in [
            "[]",
            "{\"version\": 2, \"findings\": []}",
            "{\"version\": 1, \"findings\": [{\"code\": \"PAL005\"}]}",
            "{\"version\": 1, \"findings\": [{\"code\": \"X\", \"object\": \"\", \"field\": \"\"}]}",
        ] {
            assert!(Baseline::parse(bad).is_err(), "{bad}");
        }
    }
}
