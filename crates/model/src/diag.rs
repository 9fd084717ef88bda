//! Diagnostics: every problem found in the input, with file, line, object and field.

use std::fmt;
use std::sync::Arc;

use crate::objects::Origin;
use crate::yaml::LineMap;

/// How bad a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth knowing; nothing was lost.
    Notice,
    /// Accepted (the API server accepts it too), but likely a mistake that changes what
    /// Palisade decides.
    Warning,
    /// The input is invalid (or, with `--skip-invalid`, an object was skipped).
    Error,
}

/// One problem in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Severity.
    pub severity: Severity,
    /// File (`<stdin>` for standard input).
    pub file: Arc<str>,
    /// 1-based line.
    pub line: usize,
    /// The object, as `Kind namespace/name` (empty when it could not be told).
    pub object: String,
    /// Field path inside the object (`spec.ingress[0].ports[1].endPort`), may be empty.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Notice => "notice",
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{}:{}: {level}: ", self.file, self.line)?;
        if !self.object.is_empty() {
            write!(f, "{}: ", self.object)?;
        }
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// The place diagnostics about one object are written to.
pub(crate) struct Ctx<'a> {
    pub origin: Origin,
    pub lines: &'a LineMap,
    /// Path of the object inside its document (`items[2]` inside a List), or empty.
    pub prefix: String,
    pub object: String,
    pub diags: Vec<Diagnostic>,
}

impl<'a> Ctx<'a> {
    pub fn new(origin: Origin, lines: &'a LineMap, prefix: String) -> Self {
        Ctx {
            origin,
            lines,
            prefix,
            object: String::new(),
            diags: Vec::new(),
        }
    }

    fn line(&self, field: &str) -> usize {
        let full = match (self.prefix.is_empty(), field.is_empty()) {
            (true, _) => field.to_string(),
            (false, true) => self.prefix.clone(),
            (false, false) => format!("{}.{field}", self.prefix),
        };
        self.lines.line_of(&full).unwrap_or(self.origin.line)
    }

    pub fn push(&mut self, severity: Severity, field: &str, message: impl Into<String>) {
        let line = self.line(field);
        self.diags.push(Diagnostic {
            severity,
            file: self.origin.file.clone(),
            line,
            object: self.object.clone(),
            field: field.to_string(),
            message: message.into(),
        });
    }

    /// Records an error at `field`.
    pub fn error(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Error, field, message);
    }

    /// Records a notice at `field`.
    pub fn notice(&mut self, field: &str, message: impl Into<String>) {
        self.push(Severity::Notice, field, message);
    }
}

/// `a.b` joined with `c` as `a.b.c`.
pub(crate) fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

/// `a.b` indexed by `i` as `a.b[i]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}
