//! A matrix as shown: which pods are rows (sources) and columns (destinations), which probes,
//! and the row-per-cell formats (json, jsonl, csv, md).

use std::io::Write;

use palisade_analysis::Probe;

/// A probe as shown: its protocol and port, and the container port name it stands for when
/// it was asked by name (then it applies only to the destinations that name that port so).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCol {
    /// Protocol and number.
    pub probe: Probe,
    /// The port name asked for, if any.
    pub name: Option<String>,
}

impl ProbeCol {
    /// `TCP/80`, or `TCP/8080 (http)`.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("{}/{} ({n})", self.probe.protocol, self.probe.port),
            None => format!("{}/{}", self.probe.protocol, self.probe.port),
        }
    }
}

/// The cells to print: rows and columns are indices into `names`.
pub struct View<'a> {
    /// Every pod's name.
    pub names: &'a [String],
    /// Sources shown.
    pub rows: Vec<usize>,
    /// Destinations shown.
    pub cols: Vec<usize>,
    /// Probes shown.
    pub probes: Vec<ProbeCol>,
    /// `allowed(probe, from, to)`, indices into `probes` and `names`.
    pub allowed: &'a dyn Fn(usize, usize, usize) -> bool,
    /// `applies(probe, to)`: whether the probe is a port of that destination (always, for
    /// probes given by number).
    pub applies: &'a dyn Fn(usize, usize) -> bool,
    /// `depends(probe, from, to)`: whether the verdict depends on the address that a
    /// workload without one will get.
    pub depends: &'a dyn Fn(usize, usize, usize) -> bool,
}

/// One cell: probe, source, destination, verdict, whether it depends on an address not
/// yet known.
pub type Cell<'v> = (&'v ProbeCol, &'v str, &'v str, bool, bool);

impl View<'_> {
    /// Every applicable (probe, from, to) cell, in output order.
    pub fn cells(&self) -> impl Iterator<Item = Cell<'_>> + '_ {
        self.probes.iter().enumerate().flat_map(move |(pi, probe)| {
            self.rows.iter().flat_map(move |&f| {
                self.cols
                    .iter()
                    .filter(move |&&t| (self.applies)(pi, t))
                    .map(move |&t| {
                        (
                            probe,
                            self.names[f].as_str(),
                            self.names[t].as_str(),
                            (self.allowed)(pi, f, t),
                            (self.depends)(pi, f, t),
                        )
                    })
            })
        })
    }

    /// `.`/`X` for a cell, `-` when the probe is not a port of the destination.
    pub fn mark(&self, probe: usize, from: usize, to: usize) -> Mark {
        if !(self.applies)(probe, to) {
            Mark::NotApplicable
        } else if (self.depends)(probe, from, to) {
            Mark::DependsOnAddress
        } else if (self.allowed)(probe, from, to) {
            Mark::Allowed
        } else {
            Mark::Denied
        }
    }
}

/// What a grid cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Allowed.
    Allowed,
    /// Denied.
    Denied,
    /// The probe is a named port the destination does not declare.
    NotApplicable,
    /// The verdict depends on the address a workload without one will get.
    DependsOnAddress,
}

/// One JSON object per line and cell.
pub fn jsonl(out: &mut impl Write, v: &View<'_>) -> std::io::Result<()> {
    let quoted: Vec<String> = v
        .names
        .iter()
        .map(|n| serde_json::Value::from(n.as_str()).to_string())
        .collect();
    let from: Vec<String> = quoted
        .iter()
        .map(|q| format!("{{\"from\":{q},\"to\":"))
        .collect();
    let probes: Vec<[String; 2]> = v
        .probes
        .iter()
        .map(|p| {
            [false, true].map(|ok| {
                format!(
                    ",\"protocol\":\"{}\",\"port\":{},\"allowed\":{ok}",
                    p.probe.protocol, p.probe.port
                )
            })
        })
        .collect();
    rows(out, v, |out, pi, f, t, ok, depends| {
        out.write_all(from[f].as_bytes())?;
        out.write_all(quoted[t].as_bytes())?;
        out.write_all(probes[pi][usize::from(ok)].as_bytes())?;
        out.write_all(if depends {
            b",\"dependsOnAddress\":true}\n"
        } else {
            b"}\n"
        })
    })
}

/// Calls `line(out, probe, from, to, allowed, depends)` for every applicable cell, in
/// output order.
fn rows<W: Write>(
    out: &mut W,
    v: &View<'_>,
    mut line: impl FnMut(&mut W, usize, usize, usize, bool, bool) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for pi in 0..v.probes.len() {
        let cols: Vec<usize> = v
            .cols
            .iter()
            .copied()
            .filter(|&t| (v.applies)(pi, t))
            .collect();
        for &f in &v.rows {
            for &t in &cols {
                line(out, pi, f, t, (v.allowed)(pi, f, t), (v.depends)(pi, f, t))?;
            }
        }
    }
    out.flush()
}

/// One JSON array of every cell.
pub fn json(out: &mut impl Write, v: &View<'_>) -> std::io::Result<()> {
    let rows: Vec<serde_json::Value> = v
        .cells()
        .map(|(probe, from, to, ok, depends)| {
            let mut cell = serde_json::json!({"from": from, "to": to, "protocol": probe.probe.protocol.as_str(), "port": probe.probe.port, "allowed": ok});
            if depends {
                cell["dependsOnAddress"] = true.into();
            }
            cell
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &rows).map_err(std::io::Error::from)?;
    writeln!(out)?;
    out.flush()
}

/// `from,to,protocol,port,allowed` lines.
pub fn csv(out: &mut impl Write, v: &View<'_>) -> std::io::Result<()> {
    writeln!(out, "from,to,protocol,port,allowed")?;
    let from: Vec<String> = v.names.iter().map(|n| format!("{n},")).collect();
    let probes: Vec<[String; 2]> = v
        .probes
        .iter()
        .map(|p| [false, true].map(|ok| format!(",{},{},{ok}\n", p.probe.protocol, p.probe.port)))
        .collect();
    rows(out, v, |out, pi, f, t, ok, _| {
        out.write_all(from[f].as_bytes())?;
        out.write_all(v.names[t].as_bytes())?;
        out.write_all(probes[pi][usize::from(ok)].as_bytes())
    })
}

/// A Markdown table per probe.
pub fn md(out: &mut impl Write, v: &View<'_>) -> std::io::Result<()> {
    for (pi, probe) in v.probes.iter().enumerate() {
        writeln!(out, "### {}\n", probe.label())?;
        let cols: Vec<&str> = v.cols.iter().map(|&c| v.names[c].as_str()).collect();
        writeln!(out, "| from \\ to | {} |", cols.join(" | "))?;
        writeln!(out, "|---|{}", "---|".repeat(cols.len()))?;
        for &f in &v.rows {
            let row: Vec<&str> = v
                .cols
                .iter()
                .map(|&t| match v.mark(pi, f, t) {
                    Mark::Allowed => "✓",
                    Mark::Denied => "✗",
                    Mark::NotApplicable => "–",
                    Mark::DependsOnAddress => "?",
                })
                .collect();
            writeln!(out, "| {} | {} |", v.names[f], row.join(" | "))?;
        }
        writeln!(out)?;
    }
    out.flush()
}
