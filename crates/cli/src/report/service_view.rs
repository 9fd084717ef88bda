//! `matrix --services` as shown: source pods as rows, Service ports as columns, and the
//! formats that print a cell per line or a grid (table, json, jsonl, csv, md).

use std::io::Write;

use palisade_analysis::{NotEvaluable, ServiceCell, ServiceColumn, ServiceMatrix};
use palisade_engine::{EndpointKind, Engine, ServiceEndpoint};
use serde_json::{Value, json};

use super::table::header_lines_of_width;

/// The Service cells to print: rows index `matrix.sources`, columns `matrix.columns`.
pub struct ServiceView<'a> {
    /// The engine the matrix was computed by.
    pub engine: &'a Engine,
    /// The cells.
    pub matrix: &'a ServiceMatrix,
    /// Each source's name (`namespace/pod`), by row.
    pub names: Vec<String>,
    /// Columns shown.
    pub cols: Vec<usize>,
}

impl ServiceView<'_> {
    /// `svc/NS/NAME:PORT` (the port's name, else its number), or `svc/NS/NAME` for a Service
    /// without ports.
    pub fn column_name(&self, col: usize) -> String {
        let c = &self.matrix.columns[col];
        let svc = &self.engine.cluster().services[c.service];
        match &c.port {
            Some(p) => format!("svc/{}/{}:{}", svc.namespace, svc.name, p.label()),
            None => format!("svc/{}/{}", svc.namespace, svc.name),
        }
    }

    /// The column.
    pub fn column(&self, col: usize) -> &ServiceColumn {
        &self.matrix.columns[col]
    }

    /// An endpoint as people read it: `ns/pod 10.0.0.3:8080`, or `10.0.0.3:8080`.
    pub fn endpoint_name(&self, e: &ServiceEndpoint) -> String {
        let addr = match e.at.ip {
            std::net::IpAddr::V6(ip) => format!("[{ip}]:{}", e.port),
            std::net::IpAddr::V4(ip) => format!("{ip}:{}", e.port),
        };
        match e.at.kind {
            EndpointKind::Pod(p) => format!("{} {addr}", self.engine.cluster().pods[p].key()),
            _ => addr,
        }
    }

    /// An endpoint as JSON: `{"pod":"ns/name","address":"10.0.0.3","port":8080}`.
    fn endpoint_json(&self, e: &ServiceEndpoint) -> Value {
        let mut v = json!({"address": e.at.ip.to_string(), "port": e.port.get()});
        if let EndpointKind::Pod(p) = e.at.kind {
            v["pod"] = self.engine.cluster().pods[p].key().into();
        }
        v
    }

    /// One cell as a JSON object.
    pub fn cell_json(&self, row: usize, col: usize) -> Value {
        let c = self.column(col);
        let mut v = json!({
            "from": self.names[row],
            "to": self.column_name(col),
            "protocol": c.port.as_ref().map(|p| p.protocol.as_str()),
            "port": c.port.as_ref().map(|p| p.port.get()),
        });
        match self.matrix.cell(row, col) {
            ServiceCell::Decided(r) => {
                v["reach"] = r.reach.as_str().into();
                v["allowed"] = r.allowed.into();
                v["endpoints"] = r.total.into();
                if r.total == 0 {
                    v["noEndpoints"] = true.into();
                }
                if !r.denied.is_empty() {
                    v["denied"] = r.denied.iter().map(|e| self.endpoint_json(e)).collect();
                }
                if r.hairpin {
                    v["hairpin"] = true.into();
                }
            }
            ServiceCell::NotEvaluable(why) => {
                v["reach"] = Value::Null;
                v["notEvaluable"] = why.reason().into();
            }
        }
        v
    }

    /// The short word of a cell: `all`, `some`, `none`, `-` (no endpoints) or `n/a`.
    pub fn word(&self, row: usize, col: usize) -> &'static str {
        match self.matrix.cell(row, col) {
            ServiceCell::Decided(r) if r.total == 0 => "-",
            ServiceCell::Decided(r) => r.reach.as_str(),
            ServiceCell::NotEvaluable(_) => "n/a",
        }
    }

    /// Every shown row.
    fn rows(&self) -> std::ops::Range<usize> {
        0..self.matrix.sources.len()
    }

    /// Whether some shown column is an ExternalName Service.
    fn any_external_name(&self) -> bool {
        self.cols
            .iter()
            .any(|&c| self.column(c).not_evaluable == Some(NotEvaluable::ExternalName))
    }
}

/// One JSON array of every cell.
pub fn json(out: &mut impl Write, v: &ServiceView<'_>) -> std::io::Result<()> {
    let cells: Vec<Value> = v
        .rows()
        .flat_map(|r| v.cols.iter().map(move |&c| v.cell_json(r, c)))
        .collect();
    serde_json::to_writer_pretty(&mut *out, &cells).map_err(std::io::Error::from)?;
    writeln!(out)?;
    out.flush()
}

/// The keys of a cell object in the order jsonl writes them.
const KEYS: [&str; 11] = [
    "from",
    "to",
    "protocol",
    "port",
    "reach",
    "allowed",
    "endpoints",
    "noEndpoints",
    "denied",
    "hairpin",
    "notEvaluable",
];

/// One JSON object per line and cell, keys in the order of [`KEYS`].
pub fn jsonl(out: &mut impl Write, v: &ServiceView<'_>) -> std::io::Result<()> {
    for r in v.rows() {
        for &c in &v.cols {
            let cell = v.cell_json(r, c);
            let mut sep = '{';
            for key in KEYS {
                if let Some(value) = cell.get(key) {
                    write!(out, "{sep}\"{key}\":{value}")?;
                    sep = ',';
                }
            }
            writeln!(out, "}}")?;
        }
    }
    out.flush()
}

/// `from,to,protocol,port,reach,allowed,endpoints,denied` lines; `denied` lists the denied
/// endpoints separated by spaces.
pub fn csv(out: &mut impl Write, v: &ServiceView<'_>) -> std::io::Result<()> {
    writeln!(out, "from,to,protocol,port,reach,allowed,endpoints,denied")?;
    for r in v.rows() {
        for &c in &v.cols {
            let col = v.column(c);
            let (protocol, port) = match &col.port {
                Some(p) => (p.protocol.as_str().to_string(), p.port.to_string()),
                None => (String::new(), String::new()),
            };
            let (reach, allowed, total, denied) = match v.matrix.cell(r, c) {
                ServiceCell::Decided(x) => (
                    x.reach.as_str(),
                    x.allowed.to_string(),
                    x.total.to_string(),
                    x.denied
                        .iter()
                        .map(|e| v.endpoint_name(e))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                ServiceCell::NotEvaluable(_) => {
                    ("n/a", String::new(), String::new(), String::new())
                }
            };
            writeln!(
                out,
                "{},{},{protocol},{port},{reach},{allowed},{total},{denied}",
                v.names[r],
                v.column_name(c)
            )?;
        }
    }
    out.flush()
}

/// The legend of the grid formats.
fn legend(v: &ServiceView<'_>) -> String {
    let mut s = "all / some / none: of the port's endpoints the source may connect to; - the port has no endpoint".to_string();
    if v.any_external_name()
        || v.rows()
            .any(|r| v.cols.iter().any(|&c| v.word(r, c) == "n/a"))
    {
        s.push_str("; n/a not evaluated (ExternalName, or no address of the Service's family)");
    }
    s
}

/// One Markdown table: a row per source, a column per Service port.
pub fn md(out: &mut impl Write, v: &ServiceView<'_>) -> std::io::Result<()> {
    writeln!(out, "{}\n", legend(v))?;
    let cols: Vec<String> = v.cols.iter().map(|&c| v.column_name(c)).collect();
    writeln!(out, "| from \\ to | {} |", cols.join(" | "))?;
    writeln!(out, "|---|{}", "---|".repeat(cols.len()))?;
    for r in v.rows() {
        let row: Vec<&str> = v.cols.iter().map(|&c| v.word(r, c)).collect();
        writeln!(out, "| {} | {} |", v.names[r], row.join(" | "))?;
    }
    out.flush()
}

/// Width of a grid column: the longest word (`none`, `some`) and a space.
const WORD: usize = 5;

const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// The text grid: a row per source, a column per Service port named downwards. Colour is
/// stripped when stdout is not a terminal or `NO_COLOR` is set.
pub fn table(out: &mut impl Write, v: &ServiceView<'_>) -> std::io::Result<()> {
    let width = v
        .names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let cols: Vec<String> = v.cols.iter().map(|&c| v.column_name(c)).collect();
    let names: Vec<&str> = cols.iter().map(String::as_str).collect();
    writeln!(
        out,
        "Services  (rows: from; columns: to, names read downwards; {})",
        legend(v)
    )?;
    for line in header_lines_of_width(&names, WORD) {
        writeln!(out, "{:width$}{}", "", line.trim_end())?;
    }
    for r in v.rows() {
        write!(out, "{:width$}", v.names[r])?;
        for &c in &v.cols {
            let word = v.word(r, c);
            let colour = match word {
                "all" => GREEN,
                "some" => YELLOW,
                "none" => RED,
                _ => "",
            };
            let pad = WORD - word.len();
            match colour {
                "" => write!(out, "{:pad$}{word}", "")?,
                _ => write!(out, "{:pad$}{colour}{word}{RESET}", "")?,
            }
        }
        writeln!(out)?;
    }
    out.flush()
}
