"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  };
  $("note").textContent = data.note;
  const depends = new Set(data.depends.map((d) => d.join(",")));

  const fill = (select, values, all) => {
    select.replaceChildren();
    if (all) select.appendChild(new Option(all, ""));
    for (const v of values) select.appendChild(new Option(v, v));
  };
  const namespaces = (axis) => [...new Set(axis.map((a) => a.namespace))].sort();
  fill($("from-ns"), namespaces(data.rows), "all");
  fill($("to-ns"), namespaces(data.cols), "all");
  fill($("protocol"), [...new Set(data.probes.map((p) => p.protocol))], "all");

  const fillPorts = () => {
    const proto = $("protocol").value;
    const sel = $("port");
    const keep = sel.value;
    sel.replaceChildren();
    data.probes.forEach((p, i) => {
      if (!proto || p.protocol === proto) sel.appendChild(new Option(p.label, String(i)));
    });
    if ([...sel.options].some((o) => o.value === keep)) sel.value = keep;
  };

  const policyName = (p) => {
    let s = p.kind + " " + (p.namespace ? p.namespace + "/" : "") + p.name;
    if (p.priority !== undefined) s += " (priority " + p.priority + ")";
    if (p.origin) s += " at " + p.origin.file + ":" + p.origin.line;
    return s;
  };
  const reasons = {
    External: "the endpoint is outside the cluster: no policy applies",
    Host: "the endpoint is a node's host address: no policy applies",
    SamePod: "a pod can always reach itself",
    NodeLocal: "from the pod's own node (kubelet probes)",
    NoPolicy: "no policy decided; allowed by default",
    IsolatedNoRuleMatched: "isolated, and no rule of the isolating policies matched",
    SharedAddress: "the pod shares its address with another pod: fails closed",
  };
  const side = (name, s) => {
    const dl = el("dl");
    dl.appendChild(el("dt", name + ": " + (s.allowed ? "allowed" : "denied") + " (" + s.tier + " tier)"));
    if (s.policy) {
      dl.appendChild(el("dd", "policy: " + policyName(s.policy)));
      const r = s.rule || {};
      dl.appendChild(el("dd", "rule: " + s.direction.toLowerCase() + " rule " + r.index + (r.name ? " \"" + r.name + "\"" : "") + ", action " + s.action + (s.failClosed ? " (fails closed)" : "")));
    }
    if (s.reason) dl.appendChild(el("dd", "reason: " + (reasons[s.reason] || s.reason)));
    for (const p of s.isolating || []) dl.appendChild(el("dd", "isolated by " + policyName(p)));
    for (const m of s.passedBy || []) dl.appendChild(el("dd", "after Pass by " + policyName(m.policy) + ", rule " + m.rule.index));
    return dl;
  };

  const explain = (p, r, c) => {
    const box = $("explanation");
    box.replaceChildren();
    const probe = data.probes[p];
    const idx = data.cells[p][r][c];
    const head = data.rows[r].name + " \u2192 " + data.cols[c].name + " " + probe.label;
    if (idx < 0) {
      box.appendChild(el("h2", head));
      box.appendChild(el("p", "The destination declares no container port of that name with this number."));
      return;
    }
    const v = data.verdicts[idx];
    const h = el("h2", (v.allowed ? "ALLOWED" : "DENIED") + ": " + head, v.allowed ? "verdict-allowed" : "verdict-denied");
    h.id = "verdict";
    box.appendChild(h);
    box.appendChild(side("egress at the source", v.egress));
    box.appendChild(side("ingress at the destination", v.ingress));
    if (depends.has([p, r, c].join(","))) {
      box.appendChild(el("p", "Depends on the address: a policy names CIDRs or nodes, and a workload here has no address yet; decided for an address outside them.", "depends-note"));
    }
    for (const td of document.querySelectorAll("#matrix td.selected")) td.classList.remove("selected");
    const cell = document.querySelector('#matrix td[data-r="' + r + '"][data-c="' + c + '"]');
    if (cell) cell.classList.add("selected");
  };

  const render = () => {
    const p = Number($("port").value);
    const table = $("matrix");
    table.replaceChildren();
    if (Number.isNaN(p) || !data.probes[p]) return;
    const fromNs = $("from-ns").value;
    const toNs = $("to-ns").value;
    const rows = data.rows.map((a, i) => [a, i]).filter(([a]) => !fromNs || a.namespace === fromNs);
    const cols = data.cols.map((a, i) => [a, i]).filter(([a]) => !toNs || a.namespace === toNs);
    const thead = el("thead");
    const hr = el("tr");
    hr.appendChild(el("th", data.probes[p].label));
    for (const [a] of cols) hr.appendChild(el("th", a.name));
    thead.appendChild(hr);
    table.appendChild(thead);
    const tbody = el("tbody");
    let lastNs = null;
    for (const [a, r] of rows) {
      const tr = el("tr");
      const th = el("th", a.name);
      if (a.namespace !== lastNs && lastNs !== null) th.className = "ns-start";
      lastNs = a.namespace;
      tr.appendChild(th);
      for (const [b, c] of cols) {
        const idx = data.cells[p][r][c];
        const cls = idx < 0 ? "na" : data.verdicts[idx].allowed ? "allowed" : "denied";
        const td = el("td", depends.has([p, r, c].join(",")) ? "?" : undefined, cls);
        td.dataset.r = r;
        td.dataset.c = c;
        td.title = a.name + " \u2192 " + b.name + ": " + (idx < 0 ? "n/a" : cls);
        td.addEventListener("click", () => explain(p, r, c));
        tr.appendChild(td);
      }
      tbody.appendChild(tr);
    }
    table.appendChild(tbody);
  };

  for (const id of ["from-ns", "to-ns", "port"]) $(id).addEventListener("change", render);
  $("protocol").addEventListener("change", () => { fillPorts(); render(); });
  fillPorts();
  // #explain=PROBE,ROW,COLUMN opens that cell's explanation (links and tests).
  const m = /explain=(\d+),(\d+),(\d+)/.exec(window.location.hash);
  if (m && data.probes[m[1]] && data.rows[m[2]] && data.cols[m[3]]) $("port").value = m[1];
  render();
  if (m && data.probes[m[1]] && data.rows[m[2]] && data.cols[m[3]]) explain(Number(m[1]), Number(m[2]), Number(m[3]));
})();
