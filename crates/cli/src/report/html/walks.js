"use strict";
// The page's data, decoded on demand: rows of cells, and each cell's explanation put
// together from its parts as `palisade explain` prints it. No document access, so that
// the same code runs in a test (Node) and in the page.
function palisadeWalks(data) {
  // Run-length-encoded rows: "IDX" or "IDX*COUNT" in base 36, "-" for none.
  const NA = -1;
  const decode = (text) => {
    const runs = [];
    let length = 0;
    for (const token of text.split(",")) {
      if (token === "") continue;
      const star = token.indexOf("*");
      const k = star < 0 ? token : token.slice(0, star);
      const n = star < 0 ? 1 : parseInt(token.slice(star + 1), 36);
      runs.push([k === "-" ? NA : parseInt(k, 36), n]);
      length += n;
    }
    const out = new Int32Array(length);
    let at = 0;
    for (const [k, n] of runs) {
      out.fill(k, at, at + n);
      at += n;
    }
    return out;
  };
  const cache = (decodeOne) => {
    const seen = new Map();
    return (a, b) => {
      const key = a + "," + b;
      let v = seen.get(key);
      if (v) return v;
      v = decodeOne(a, b);
      if (seen.size > 4096) seen.clear();
      seen.set(key, v);
      return v;
    };
  };
  // row(p, r)[c]: the kind of a cell, NA when the probe is not a port of the destination.
  const row = cache((p, r) => decode(data.cells[p][r]));
  // step(table, p)[other]: a policy's step for each pod or class at the other end.
  const step = cache((t, p) => decode(data.tables[t][p]));
  const text = (i) => data.texts[i];
  // One admin tier: its first line, then each policy's outcome until one matched.
  const tier = (lines, line, policies, p, other) => {
    lines.push(text(line));
    let decided = false;
    for (const [head, t] of policies) {
      if (decided) {
        lines.push(text(head) + ": " + text(data.notReached));
        continue;
      }
      const [outcome, matched] = data.steps[step(t, p)[other]];
      lines.push(text(head) + ": " + text(outcome));
      decided = matched === 1;
    }
  };
  // The walk of one side of cell (p, r, c): egress at the row, ingress at the column.
  const sideText = (p, r, c, egress) => {
    const kind = data.kinds[row(p, r)[c]];
    const [verdict, walked, stopsAtAdmin, listsRules] = data.sides[egress ? kind[1] : kind[2]];
    const lines = [];
    if (walked) {
      const subject = data.subjects[egress ? data.rows[r].subject : data.cols[c].subject];
      const [adminLine, admin, networkLine, isolated, network, baselineLine, baseline] = subject;
      const other = egress ? c : r;
      tier(lines, adminLine, admin, p, other);
      if (!stopsAtAdmin) {
        lines.push(text(networkLine));
        if (listsRules) {
          for (const [head, t] of network) {
            lines.push(text(head) + ": " + text(data.steps[step(t, p)[other]][0]));
          }
        }
        if (!isolated) tier(lines, baselineLine, baseline, p, other);
      }
    }
    lines.push(text(verdict));
    return lines.join("\n");
  };
  return { NA, row, sideText };
}
if (typeof module === "object") module.exports = palisadeWalks;
