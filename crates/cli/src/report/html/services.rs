//! `matrix --services -o html`: one self-contained page in the style of the pod matrix's,
//! a row per source and a column per Service port, each cell's endpoints in its tooltip.

use std::io::Write;

use palisade_analysis::ServiceCell;

use super::STYLE;
use crate::report::service_view::ServiceView;

/// Escapes text for HTML content and attribute values.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The colour class of a cell and its tooltip.
fn cell(v: &ServiceView<'_>, row: usize, col: usize) -> (&'static str, String) {
    let head = format!("{} -> {}", v.names[row], v.column_name(col));
    match v.matrix.cell(row, col) {
        ServiceCell::NotEvaluable(why) => {
            ("na", format!("{head}: not evaluated: {}", why.reason()))
        }
        ServiceCell::Decided(r) if r.total == 0 => ("na", format!("{head}: no endpoint")),
        ServiceCell::Decided(r) => {
            let mut tip = format!(
                "{head}: {} ({} of {} endpoints)",
                r.reach.as_str(),
                r.allowed,
                r.total
            );
            for e in &r.denied {
                tip.push_str(&format!("\ndenied: {}", v.endpoint_name(e)));
            }
            if r.hairpin {
                tip.push_str("\nthe source is itself an endpoint: its connection to itself is subject to policy");
            }
            let class = match r.reach {
                palisade_engine::Reach::All => "allowed",
                palisade_engine::Reach::Some => "some",
                palisade_engine::Reach::None => "denied",
            };
            (class, tip)
        }
    }
}

/// The page.
pub fn services(out: &mut impl Write, v: &ServiceView<'_>) -> std::io::Result<()> {
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Palisade Service matrix</title>\n<style>\n{STYLE}.some {{ background: #e90; }}\n#matrix td {{ cursor: default; }}\n</style>\n</head>\n<body>\n<h1>Palisade Service matrix</h1>\n<p class=\"legend\"><span class=\"cell allowed\"></span> every endpoint reachable <span class=\"cell some\"></span> some <span class=\"cell denied\"></span> none <span class=\"cell na\"></span> no endpoint, or not evaluated (ExternalName). Rows: from; columns: Service ports. Hover over a cell for its endpoints.</p>\n<div id=\"layout\"><div id=\"grid\"><table id=\"matrix\">\n<thead><tr><th></th>"
    )?;
    for &c in &v.cols {
        write!(out, "<th>{}</th>", escape(&v.column_name(c)))?;
    }
    writeln!(out, "</tr></thead>\n<tbody>")?;
    for r in 0..v.names.len() {
        write!(out, "<tr><th>{}</th>", escape(&v.names[r]))?;
        for &c in &v.cols {
            let (class, tip) = cell(v, r, c);
            write!(
                out,
                "<td class=\"{class}\" title=\"{}\" data-reach=\"{}\"></td>",
                escape(&tip),
                v.word(r, c)
            )?;
        }
        writeln!(out, "</tr>")?;
    }
    writeln!(out, "</tbody></table></div></div>\n</body>\n</html>")?;
    out.flush()
}
