//! The text grid: one per probe, rows are sources, columns destinations named by headers
//! written downwards, `.` allowed, `X` denied, `-` a named port the destination lacks.

use std::io::Write;

use super::view::{Mark, View};

/// Most rows or columns `-o table` prints without `--force`: wider grids are unreadable.
pub const MAX_ENDPOINTS: usize = 200;

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const RESET: &str = "\x1b[0m";

/// The rotated header: `lines[k]` holds the k-th character row, each column's name
/// bottom-aligned so its last character sits just above the grid.
fn header_lines(names: &[&str]) -> Vec<String> {
    header_lines_of_width(names, 2)
}

/// [`header_lines`] with columns `width` characters wide, each name's characters on the
/// right of its column.
pub(super) fn header_lines_of_width(names: &[&str], width: usize) -> Vec<String> {
    let chars: Vec<Vec<char>> = names.iter().map(|n| n.chars().collect()).collect();
    let height = chars.iter().map(Vec::len).max().unwrap_or(0);
    (0..height)
        .map(|k| {
            chars
                .iter()
                .map(|c| {
                    let pad = height - c.len();
                    let ch = if k >= pad { c[k - pad] } else { ' ' };
                    format!("{ch:>width$}")
                })
                .collect::<String>()
        })
        .collect()
}

/// The grids. Colour is stripped when stdout is not a terminal or `NO_COLOR` is set.
pub fn table(out: &mut impl Write, v: &View<'_>) -> std::io::Result<()> {
    let width = v
        .rows
        .iter()
        .map(|&r| v.names[r].chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let cols: Vec<&str> = v.cols.iter().map(|&c| v.names[c].as_str()).collect();
    let header = header_lines(&cols);
    let any_named = v.probes.iter().any(|p| p.name.is_some());
    let any_depends = (0..v.probes.len()).any(|p| {
        v.rows
            .iter()
            .any(|&f| v.cols.iter().any(|&t| (v.depends)(p, f, t)))
    });
    for (pi, probe) in v.probes.iter().enumerate() {
        writeln!(
            out,
            "{}  (rows: from; columns: to, names read downwards; . allowed, X denied{}{})",
            probe.label(),
            if any_named {
                ", - the destination has no port of that name"
            } else {
                ""
            },
            if any_depends {
                ", ? depends on the address a workload will get"
            } else {
                ""
            }
        )?;
        for line in &header {
            writeln!(out, "{:width$}{}", "", line.trim_end())?;
        }
        for &f in &v.rows {
            write!(out, "{:width$}", v.names[f])?;
            for &t in &v.cols {
                match v.mark(pi, f, t) {
                    Mark::Allowed => write!(out, " {GREEN}.{RESET}")?,
                    Mark::Denied => write!(out, " {RED}X{RESET}")?,
                    Mark::NotApplicable => write!(out, " -")?,
                    Mark::DependsOnAddress => write!(out, " ?")?,
                }
            }
            writeln!(out)?;
        }
        writeln!(out)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_bottom_aligned_and_downwards() {
        let lines = header_lines(&["x/a", "ab/cd"]);
        assert_eq!(lines, ["   a", "   b", " x /", " / c", " a d"]);
    }
}
