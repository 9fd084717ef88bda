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
  // Rows of cells and the walks' parts are decoded only when shown (walks.js).
  const walks = palisadeWalks(data);
  const NA = walks.NA;
  const row = walks.row;
  // kinds[k] = [allowed, egress side, ingress side, depends on an address]
  const kind = (k) => data.kinds[k];

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

  const select = (r, c) => {
    for (const td of document.querySelectorAll("#matrix td.selected")) td.classList.remove("selected");
    const cell = document.querySelector('#matrix td[data-r="' + r + '"][data-c="' + c + '"]');
    if (cell) cell.classList.add("selected");
  };

  // The explanation: the verdict, then each side's tier-by-tier walk with why each rule
  // of the policies that decided did not match, as `palisade explain` prints it.
  const explain = (p, r, c) => {
    const box = $("explanation");
    box.replaceChildren();
    const probe = data.probes[p];
    const k = row(p, r)[c];
    const head = data.rows[r].name + " \u2192 " + data.cols[c].name + " " + probe.label;
    select(r, c);
    if (k === NA) {
      box.appendChild(el("h2", head));
      box.appendChild(el("p", "The destination declares no container port of that name with this number."));
      return;
    }
    const [allowed, , , depends] = kind(k);
    const h = el("h2", (allowed ? "ALLOWED" : "DENIED") + ": " + head, allowed ? "verdict-allowed" : "verdict-denied");
    h.id = "verdict";
    box.appendChild(h);
    box.appendChild(el("h3", "Egress at " + data.rows[r].name + ":"));
    box.appendChild(el("pre", walks.sideText(p, r, c, true), "walk"));
    box.appendChild(el("h3", "Ingress at " + data.cols[c].name + ":"));
    box.appendChild(el("pre", walks.sideText(p, r, c, false), "walk"));
    // The two pods the cell stands for: distinct members when a class meets itself.
    const from = data.rows[r].pod;
    const to = data.cols[c].pod === from && data.cols[c].pod2 ? data.cols[c].pod2 : data.cols[c].pod;
    box.appendChild(el("p", "The same as palisade explain --from " + from + " --to " + to + " --port " + probe.port
      + " --protocol " + probe.protocol + " (with the same -f)" + (data.level === "classes" ? ", for two pods of these classes." : "."), "walk-note"));
    if (depends) {
      box.appendChild(el("p", "Depends on the address: a policy names CIDRs or nodes, and a workload here has no address yet; decided for an address outside them.", "depends-note"));
    }
  };

  // Rows go into the document a chunk at a time: the first chunk at once, the next when
  // the end of the table scrolls into view (or on "more rows").
  const CHUNK = 50;
  let shown = null;
  const more = $("more");
  const renderRows = () => {
    if (!shown) return;
    const { p, rows, cols, tbody } = shown;
    const end = Math.min(shown.next + CHUNK, rows.length);
    const frag = document.createDocumentFragment();
    for (let i = shown.next; i < end; i++) {
      const r = rows[i];
      const a = data.rows[r];
      const tr = el("tr");
      const th = el("th", a.name);
      if (i > 0 && data.rows[rows[i - 1]].namespace !== a.namespace) th.className = "ns-start";
      tr.appendChild(th);
      const cells = row(p, r);
      for (const c of cols) {
        const k = cells[c];
        const kk = k === NA ? null : kind(k);
        const cls = kk === null ? "na" : kk[0] ? "allowed" : "denied";
        const td = el("td", kk !== null && kk[3] ? "?" : undefined, cls);
        td.dataset.r = r;
        td.dataset.c = c;
        tr.appendChild(td);
      }
      frag.appendChild(tr);
    }
    tbody.appendChild(frag);
    shown.next = end;
    more.replaceChildren();
    if (end < rows.length) {
      const b = el("button", "more rows (" + end + " of " + rows.length + " shown)");
      b.type = "button";
      b.addEventListener("click", renderRows);
      more.appendChild(b);
    }
  };
  const observer = "IntersectionObserver" in window
    ? new IntersectionObserver((entries) => { if (entries.some((e) => e.isIntersecting)) renderRows(); })
    : null;
  if (observer) observer.observe(more);

  const render = () => {
    const p = Number($("port").value);
    const table = $("matrix");
    table.replaceChildren();
    shown = null;
    more.replaceChildren();
    if (Number.isNaN(p) || !data.probes[p]) return;
    const fromNs = $("from-ns").value;
    const toNs = $("to-ns").value;
    const rows = [];
    data.rows.forEach((a, i) => { if (!fromNs || a.namespace === fromNs) rows.push(i); });
    const cols = [];
    data.cols.forEach((a, i) => { if (!toNs || a.namespace === toNs) cols.push(i); });
    const thead = el("thead");
    const hr = el("tr");
    hr.appendChild(el("th", data.probes[p].label));
    for (const c of cols) hr.appendChild(el("th", data.cols[c].name));
    thead.appendChild(hr);
    table.appendChild(thead);
    const tbody = el("tbody");
    table.appendChild(tbody);
    shown = { p, rows, cols, tbody, next: 0 };
    renderRows();
  };

  // One listener for every cell: the cell's title and explanation are made on demand.
  const cellOf = (e) => {
    const td = e.target.closest ? e.target.closest("td") : null;
    return td && td.dataset.r !== undefined ? td : null;
  };
  $("matrix").addEventListener("click", (e) => {
    const td = cellOf(e);
    if (td && shown) explain(shown.p, Number(td.dataset.r), Number(td.dataset.c));
  });
  $("matrix").addEventListener("mouseover", (e) => {
    const td = cellOf(e);
    if (td && !td.title) {
      td.title = data.rows[td.dataset.r].name + " \u2192 " + data.cols[td.dataset.c].name + ": " + td.className.replace(" selected", "");
    }
  });

  for (const id of ["from-ns", "to-ns", "port"]) $(id).addEventListener("change", render);
  $("protocol").addEventListener("change", () => { fillPorts(); render(); });
  fillPorts();
  // #explain=PROBE,ROW,COLUMN opens that cell's explanation (links and tests).
  const m = /explain=(\d+),(\d+),(\d+)/.exec(window.location.hash);
  const linked = m && data.probes[m[1]] && data.rows[m[2]] && data.cols[m[3]];
  if (linked) $("port").value = m[1];
  render();
  void $("matrix").offsetHeight; // lay the table out, as the first paint will
  // When the first rows were in the document, and the linked explanation open (ms since
  // navigation start; bench/html.sh reads them).
  document.body.dataset.renderedMs = performance.now().toFixed(0);
  if (linked) {
    explain(Number(m[1]), Number(m[2]), Number(m[3]));
    document.body.dataset.explainedMs = performance.now().toFixed(0);
  }
})();
