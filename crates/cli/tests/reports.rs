//! Reports and queries for people: ports as numbers, ranges and names, allowed-port
//! listings, exit codes, why-not explanations, focused and readable matrices, Graphviz
//! and HTML views.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, palisade_stdin, stderr, stdout};

fn json(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

#[test]
fn eval_echoes_the_flow_in_text_and_json() {
    let args = [
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
        "--port",
        "80",
    ];
    let o = palisade(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("DENIED: y/a (10.0.1.10) -> x/a (10.0.0.10) TCP/80\n"),
        "{out}"
    );
    let o = palisade(&[&args[..], &["-o", "json"]].concat());
    let v = json(&o);
    assert_eq!(v["from"]["name"], "y/a");
    assert_eq!(v["to"]["ip"], "10.0.0.10");
    assert_eq!(v["protocol"], "TCP");
    assert_eq!(v["port"], 80);
    assert_eq!(v["allowed"], false);
    assert_eq!(v["ingress"]["reason"], "IsolatedNoRuleMatched");
}

#[test]
fn eval_exit_code_is_0_allowed_3_denied() {
    let base = [
        "eval",
        "-f",
        "examples/xyz",
        "--to",
        "x/a",
        "--port",
        "80",
        "--exit-code",
    ];
    let allowed = palisade(&[&base[..], &["--from", "y/b"]].concat());
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let denied = palisade(&[&base[..], &["--from", "y/a"]].concat());
    assert_eq!(denied.status.code(), Some(3), "{}", stderr(&denied));
    assert!(
        stdout(&denied).starts_with("DENIED"),
        "the verdict is still printed"
    );
    let without = palisade(
        &base[..base.len() - 1]
            .iter()
            .chain(&["--from", "y/a"])
            .copied()
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        without.status.code(),
        Some(0),
        "without --exit-code a deny exits 0"
    );
}

#[test]
fn eval_resolves_named_ports_against_the_destination() {
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "serve-81-udp",
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(
        (v["protocol"].as_str(), v["port"].as_u64()),
        (Some("UDP"), Some(81)),
        "the name's number and protocol"
    );
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "nope",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains("x/a has no container port named nope (its ports: 80/TCP (serve-80-tcp)"),
        "{}",
        stderr(&o)
    );
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "192.0.2.1",
        "--port",
        "http",
    ]);
    assert_eq!(o.status.code(), Some(2), "a name needs a destination pod");
}

#[test]
fn eval_without_port_lists_allowed_ports_as_ranges() {
    let o = palisade(&["eval", "-f", "examples/xyz", "--from", "y/b", "--to", "x/a"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("allowed: TCP 80; UDP none; SCTP none\n"),
        "{out}"
    );
    assert!(out.contains("TCP 81-65535: DENIED\n"), "{out}");
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "79-81",
        "-o",
        "json",
    ]);
    let v = json(&o);
    assert_eq!(v["allowedPorts"]["TCP"], serde_json::json!(["80"]));
    let ranges: Vec<&str> = v["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["ports"].as_str().unwrap())
        .collect();
    assert_eq!(ranges, ["79", "80", "81"]);
    let o = palisade(&[
        "eval",
        "-f",
        "examples/xyz",
        "--from",
        "y/b",
        "--to",
        "x/a",
        "--port",
        "79-81",
        "--exit-code",
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "a range is allowed only if every port is"
    );
}

#[test]
fn explain_says_why_not() {
    let args = [
        "explain",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
        "--port",
        "80",
    ];
    let o = palisade(&args);
    let out = stdout(&o);
    assert!(
        out.contains("ingress rule 0: from namespaceSelector {ns=y} podSelector {pod=b} (the pod's labels do not match)"),
        "{out}"
    );
    assert!(
        out.contains(
            "egress rule 0 \"no-y-to-z\": to namespaces {ns=z} (the namespace is not selected)"
        ),
        "{out}"
    );
    let v = json(&palisade(&[&args[..], &["-o", "json"]].concat()));
    let np = &v["walk"]["ingress"][1];
    assert_eq!(np["tier"], "NetworkPolicy");
    assert_eq!(np["whyNot"][0]["policy"]["name"], "allow-from-y-b");
    assert_eq!(
        np["whyNot"][0]["rules"][0]["peers"][0]["reason"],
        "PodLabelsNotSelected"
    );
    let o = palisade(&[
        "explain",
        "-f",
        "examples/xyz",
        "--from",
        "y/a",
        "--to",
        "x/a",
    ]);
    assert_eq!(o.status.code(), Some(2), "explain needs a port");
}

/// `n` pods `x/p000`.. with addresses, one NetworkPolicy; and two pods whose only
/// difference is an ipBlock's side.
fn many_pods(n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i:03}, namespace: x, labels: {{app: a}}}}\nstatus: {{podIP: 10.0.{}.{}}}\n---\n",
            i / 250,
            i % 250 + 1
        ));
    }
    s
}

const CIDR_TWINS: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: in, namespace: x, labels: {app: a}}\nstatus: {podIP: 10.0.0.1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: out, namespace: x, labels: {app: a}}\nstatus: {podIP: 10.9.0.1}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: from-net, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/16}}]}]\n";

#[test]
fn table_names_its_columns() {
    let o = palisade(&["matrix", "-f", "examples/xyz", "--ports", "80"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("TCP/80  (rows: from; columns: to, names read downwards"),
        "{out}"
    );
    assert_eq!(lines[1], "     x x x y y y z z z", "namespaces, downwards");
    assert_eq!(lines[2], "     / / / / / / / / /");
    assert_eq!(lines[3], "     a b c a b c a b c", "pod names, downwards");
    assert_eq!(lines[4], "x/a  . X X . . . . . X");
}

#[test]
fn a_wide_table_is_refused_with_a_hint_unless_forced() {
    let yaml = many_pods(201);
    let o = palisade_stdin(&["matrix", "-f", "-", "--ports", "80"], &yaml);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("201 sources x 201 destinations is too wide"),
        "{err}"
    );
    assert!(
        err.contains("-o summary") && err.contains("--force") && err.contains("--from"),
        "{err}"
    );
    assert!(stdout(&o).is_empty());
    let o = palisade_stdin(&["matrix", "-f", "-", "--ports", "80", "--force"], &yaml);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o).lines().count(),
        1 + 6 + 201 + 1,
        "title, 6 header lines (x/p000), rows, blank"
    );
    let o = palisade_stdin(
        &[
            "matrix", "-f", "-", "--ports", "80", "--from", "x/p00*", "--to", "x/p1*",
        ],
        &yaml,
    );
    assert!(o.status.success(), "a focus narrows it: {}", stderr(&o));
    let o = palisade_stdin(
        &["matrix", "-f", "-", "--ports", "80", "-o", "summary"],
        &yaml,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("201 pods in 1 classes"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn an_empty_matrix_is_an_error() {
    let o = palisade_stdin(
        &["matrix", "-f", "-"],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: pending, namespace: x}\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no pod in the input has an address"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn focus_flags_pick_rows_and_columns() {
    let cells = |extra: &[&str]| -> Vec<(String, String)> {
        let o = palisade(
            &[
                &[
                    "matrix",
                    "-f",
                    "examples/xyz",
                    "--ports",
                    "80",
                    "-o",
                    "jsonl",
                ][..],
                extra,
            ]
            .concat(),
        );
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
        stdout(&o)
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["from"].as_str().unwrap().to_string(),
                    v["to"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let c = cells(&["--from", "y/b", "--to", "x"]);
    assert_eq!(
        c,
        [("y/b", "x/a"), ("y/b", "x/b"), ("y/b", "x/c")].map(|(a, b)| (a.into(), b.into()))
    );
    let c = cells(&["--namespace", "z", "--direction", "ingress"]);
    assert_eq!(c.len(), 9 * 3, "every source, destinations in z");
    assert!(c.iter().all(|(_, to)| to.starts_with("z/")));
    let c = cells(&["--namespace", "z", "--direction", "egress"]);
    assert!(c.len() == 27 && c.iter().all(|(from, _)| from.starts_with("z/")));
    let c = cells(&["--namespace", "x,y"]);
    assert_eq!(c.len(), 36, "both sides in x or y");
    let o = palisade(&["matrix", "-f", "examples/xyz", "--from", "q/*"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "a pattern matching nothing is a usage error"
    );
    let o = palisade(&["matrix", "-f", "examples/xyz", "--direction", "ingress"]);
    assert_eq!(o.status.code(), Some(2), "--direction needs --namespace");
}

#[test]
fn matrix_ports_take_ranges_and_names() {
    let o = palisade(&[
        "matrix",
        "-f",
        "examples/xyz",
        "--ports",
        "79-81,serve-80-udp",
        "-o",
        "csv",
        "--from",
        "y/b",
        "--to",
        "x/a",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "from,to,protocol,port,allowed\ny/b,x/a,TCP,79,false\ny/b,x/a,TCP,80,true\ny/b,x/a,TCP,81,false\ny/b,x/a,UDP,80,false\n"
    );
    let o = palisade(&["matrix", "-f", "examples/xyz", "--ports", "nothing-here"]);
    assert_eq!(o.status.code(), Some(2), "a name no pod declares");
    let o = palisade(&["matrix", "-f", "examples/xyz", "--ports", "1-5000"]);
    assert_eq!(o.status.code(), Some(2), "too many probes");
    assert!(stderr(&o).contains("palisade eval"), "{}", stderr(&o));
}

#[test]
fn summary_says_why_same_label_classes_differ() {
    let o = palisade_stdin(
        &["matrix", "-f", "-", "--ports", "80", "-o", "summary"],
        CIDR_TWINS,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("classes with namespace x {app=a} differ:"),
        "{out}"
    );
    assert!(
        out.contains("C0 (x/in) vs C1 (x/out): 10.0.0.0/16 (named by NetworkPolicy x/from-net) holds the first one's address only"),
        "{out}"
    );
}

#[test]
fn dot_output_is_a_graph_graphviz_reads() {
    let o = palisade(&[
        "matrix",
        "-f",
        "examples/xyz",
        "--ports",
        "80,81",
        "-o",
        "dot",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dot = stdout(&o);
    assert!(
        dot.contains("subgraph cluster_0 {\n    label=\"namespace x\";"),
        "{dot}"
    );
    // y/b reaches x/a on 80 only: a labelled edge; z/a reaches z/b on everything: a plain one.
    assert!(dot.contains("c4 -> c0 [label=\"TCP/80\"];"), "{dot}");
    assert!(dot.contains("c6 -> c7;"), "{dot}");
    let mut child = std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("Graphviz `dot` (apt-get install graphviz; .ci/run installs it)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let svg = child.wait_with_output().unwrap();
    assert!(
        svg.status.success(),
        "dot -Tsvg: {}",
        String::from_utf8_lossy(&svg.stderr)
    );
    assert!(String::from_utf8_lossy(&svg.stdout).contains("<svg"));
}

/// Runs headless Chromium on `url` with `args`; returns stdout.
fn chromium(args: &[&str], url: &str) -> String {
    let o = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("Debian's `chromium` (apt-get install chromium; .ci/run installs it)");
    assert!(
        o.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn html_is_self_contained_and_renders_in_a_browser() {
    let o = palisade(&["matrix", "-f", "examples/xyz", "-o", "html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    for external in ["http://", "https://", "src=", "href=", "@import", "url("] {
        assert!(!page.contains(external), "no external resource: {external}");
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("matrix.html");
    std::fs::write(&file, &page).unwrap();
    // Probe 0 is TCP/80; row 3 is y/a and column 0 x/a: denied by x's isolation.
    let url = format!("file://{}#explain=0,3,0", file.display());
    let dom = chromium(&["--dump-dom"], &url);
    assert_eq!(dom.matches("<td ").count(), 81, "the 9x9 table rendered");
    assert!(
        dom.contains(r#"<h2 class="verdict-denied" id="verdict">DENIED: y/a → x/a TCP/80</h2>"#),
        "{dom}"
    );
    assert!(
        dom.contains("NetworkPolicy tier: isolated for ingress by NetworkPolicy x/allow-from-y-b (examples/xyz/policies/01-deny-ingress-x.yaml:2)"),
        "the verdict's own provenance"
    );
    // The why-not `explain` prints, rule by rule, for both sides.
    for why in [
        "Ingress at x/a:",
        "ingress rule 0: from namespaceSelector {ns=y} podSelector {pod=b} (the pod's labels do not match)",
        "    NetworkPolicy x/allow-from-y-b: no rule matched",
        "=&gt; denied: NetworkPolicy tier: isolated by NetworkPolicy x/allow-from-y-b and no rule matched",
        "Egress at y/a:",
        "palisade explain --from y/a --to x/a --port 80 --protocol TCP",
    ] {
        assert!(dom.contains(why), "{why}\n{dom}");
    }
    // An Admin tier walk: x/a (row 0) to z/c (column 8), every policy of the tier.
    let dom = chromium(
        &["--dump-dom"],
        &format!("file://{}#explain=0,0,8", file.display()),
    );
    for line in [
        "  Admin tier, in priority order:",
        "    AdminNetworkPolicy protect-z-c (priority 10, examples/xyz/policies/02-anp.yaml:2): matched ingress rule 1 \"deny-everyone-else\" (Deny)",
        "=&gt; denied: Admin tier: AdminNetworkPolicy protect-z-c, ingress rule 1 \"deny-everyone-else\" (Deny)",
    ] {
        assert!(dom.contains(line), "{line}\n{dom}");
    }
    let shot = dir.join("matrix.png");
    std::fs::remove_file(&shot).ok();
    chromium(
        &[
            "--window-size=1200,700",
            &format!("--screenshot={}", shot.display()),
        ],
        &url,
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "a screenshot under target/"
    );
}

/// The data an HTML page carries (the JSON of its `data` script element).
fn page_data(page: &str) -> serde_json::Value {
    let start = page
        .find(r#"<script type="application/json" id="data">"#)
        .unwrap();
    let rest = &page[start..];
    let json = &rest[rest.find('>').unwrap() + 1..rest.find("</script>").unwrap()];
    serde_json::from_str(json).unwrap()
}

/// The kind (`[allowed, egress walk, ingress walk, depends]`) of a page's cell, decoding its
/// row as the page's script does; `None` when the probe is not a port of the destination.
fn page_cell(data: &serde_json::Value, p: usize, r: usize, c: usize) -> Option<Vec<u64>> {
    let mut at = 0;
    for token in data["cells"][p][r].as_str().unwrap().split(',') {
        let (k, n) = token.split_once('*').unwrap_or((token, "1"));
        at += usize::from_str_radix(n, 36).unwrap();
        if c < at {
            if k == "-" {
                return None;
            }
            let k = usize::from_str_radix(k, 36).unwrap();
            let kind = data["kinds"][k].as_array().unwrap();
            return Some(kind.iter().map(|v| v.as_u64().unwrap()).collect());
        }
    }
    panic!("no column {c} in row {r}")
}

#[test]
fn html_writes_each_explanation_once_and_shows_rows_in_chunks() {
    // 120 pods told apart by their labels: 120 rows, every ingress denied but from p000.
    let mut yaml = String::new();
    for i in 0..120 {
        yaml.push_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i:03}, namespace: x, labels: {{app: a{i}}}}}\nstatus: {{podIP: 10.0.0.{}}}\n---\n",
            i + 1
        ));
    }
    yaml.push_str("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: only-a0, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{from: [{podSelector: {matchLabels: {app: a0}}}]}]\n");
    let o = palisade_stdin(&["matrix", "-f", "-", "--ports", "80", "-o", "html"], &yaml);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    let data = page_data(&page);
    // Row 1 (p001) to column 2 (p002): denied, with the rule and why not.
    let k = page_cell(&data, 0, 1, 2).unwrap();
    assert_eq!(k[0], 0, "denied");
    assert!(
        data["texts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_str().unwrap().contains(
                "ingress rule 0: from podSelector {app=a0} (the pod's labels do not match)"
            )),
        "{}",
        data["texts"]
    );
    assert_eq!(page_cell(&data, 0, 0, 2).unwrap()[0], 1, "p000 is let in");
    // 14,280 cells share a handful of sides and steps, each written once.
    assert!(
        page.matches("(the pod's labels do not match)").count() == 1,
        "one copy of the why-not"
    );
    for (table, most) in [("sides", 10), ("steps", 4), ("subjects", 4)] {
        assert!(
            data[table].as_array().unwrap().len() < most,
            "{table}: {}",
            data[table]
        );
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chunks.html");
    std::fs::write(&file, &page).unwrap();
    let dom = chromium(
        &["--dump-dom"],
        &format!("file://{}#explain=0,1,2", file.display()),
    );
    assert_eq!(
        dom.matches("<td ").count(),
        50 * 120,
        "the first 50 rows are in the document, not all 120"
    );
    assert!(dom.contains("more rows (50 of 120 shown)"), "{dom}");
    assert!(
        dom.contains("ingress rule 0: from podSelector {app=a0} (the pod's labels do not match)"),
        "the panel shows the why-not"
    );
}

#[test]
fn html_aggregates_to_classes_above_200_pods() {
    let o = palisade_stdin(
        &["matrix", "-f", "-", "--ports", "80", "-o", "html"],
        many_pods(250),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.contains("\"level\":\"classes\""), "aggregated");
    assert!(
        page.contains(
            "250 sources and 250 destinations: more than 200, so each row and column is a class"
        ),
        "and says so"
    );
    // The one class meets itself: the panel's command names two distinct pods of it.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("reports");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("classes.html");
    std::fs::write(&file, &page).unwrap();
    let dom = chromium(
        &["--dump-dom"],
        &format!("file://{}#explain=0,0,0", file.display()),
    );
    assert!(
        dom.contains("palisade explain --from x/p000 --to x/p001 --port 80 --protocol TCP"),
        "{dom}"
    );
}

const ON_NODES: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x, labels: {app: a}}\nspec: {nodeName: n1}\nstatus: {podIP: 10.0.0.1, hostIP: 192.168.0.1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: x, labels: {app: b}}\nspec: {nodeName: n2}\nstatus: {podIP: 10.0.0.2, hostIP: 192.168.0.2}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: agent, namespace: x}\nspec: {nodeName: n2, hostNetwork: true}\nstatus: {podIP: 192.168.0.2, hostIP: 192.168.0.2}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: x}\nspec: {podSelector: {}}\n";

const NODES: &str = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.1}]}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n2}\nstatus: {addresses: [{type: InternalIP, address: 192.168.0.2}]}\n";

#[test]
fn node_addresses_come_from_pods_when_nodes_are_not_dumped() {
    let matrix = |yaml: &str| {
        let o = palisade_stdin(&["matrix", "-f", "-", "--ports", "80", "-o", "jsonl"], yaml);
        assert!(o.status.success(), "{}", stderr(&o));
        (stdout(&o), stderr(&o))
    };
    let (with_nodes, _) = matrix(&format!("{ON_NODES}---\n{NODES}"));
    let (without, notices) = matrix(ON_NODES);
    assert_eq!(with_nodes, without, "the same verdicts either way");
    assert!(
        without
            .contains(r#"{"from":"x/agent","to":"x/b","protocol":"TCP","port":80,"allowed":true}"#),
        "the node-local exemption holds with the node taken from the pods: {without}"
    );
    assert!(
        notices.contains("<stdin>:1: notice: Node n1: not in the input; its address 192.168.0.1 is taken from Pod x/a's status.hostIP"),
        "{notices}"
    );
}

#[test]
fn workloads_stand_for_their_pods() {
    // The shop's Services are read (they are destinations); a kind Palisade does not read
    // is skipped with one notice per kind.
    let config_map =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n";
    let o = palisade_stdin(
        &[
            "matrix",
            "-f",
            "examples/shop",
            "-",
            "--ports",
            "postgres,http",
            "-o",
            "jsonl",
        ],
        config_map,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        r#"{"from":"shop/web[Deployment]","to":"shop/db[StatefulSet]","protocol":"TCP","port":5432,"allowed":true}"#,
        r#"{"from":"shop/backup[CronJob]","to":"shop/db[StatefulSet]","protocol":"TCP","port":5432,"allowed":true}"#,
        // replica to replica: the database's policy admits only web and backup
        r#"{"from":"shop/db[StatefulSet]","to":"shop/db[StatefulSet]","protocol":"TCP","port":5432,"allowed":false}"#,
        // web admits an ipBlock: whether db's future address is in it is not known
        r#"{"from":"shop/db[StatefulSet]","to":"shop/web[Deployment]","protocol":"TCP","port":8080,"allowed":false,"dependsOnAddress":true}"#,
    ] {
        assert!(out.lines().any(|l| l == line), "{line}\n{out}");
    }
    assert_eq!(
        out.lines().count(),
        3 + 3,
        "postgres on db only, http on web only"
    );
    let err = stderr(&o);
    assert_eq!(
        err,
        "<stdin>:2: notice: v1 ConfigMap is not a kind Palisade reads; 1 object(s) skipped (--verbose lists them)\n",
        "one line per skipped kind"
    );
    let o = palisade_stdin(
        &[
            "matrix",
            "-f",
            "examples/shop",
            "-",
            "-o",
            "summary",
            "--verbose",
        ],
        config_map,
    );
    assert!(
        stderr(&o).contains(
            "<stdin>:2: notice: ConfigMap shop/settings: kind: v1 ConfigMap is not a kind Palisade reads; skipped"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("Service"), "{}", stderr(&o));
    let o = palisade(&[
        "eval",
        "-f",
        "examples/shop",
        "--from",
        "shop/db[StatefulSet]",
        "--to",
        "shop/web[Deployment]",
        "--port",
        "http",
    ]);
    let out = stdout(&o);
    assert!(out.starts_with("DENIED: shop/db[StatefulSet] (no address yet) -> shop/web[Deployment] (no address yet) TCP/8080\n"), "{out}");
    assert!(
        out.contains("note: a policy names CIDRs or nodes, so this depends on the address"),
        "{out}"
    );
    let o = palisade(&[
        "explain",
        "-f",
        "examples/shop",
        "--from",
        "shop/db[StatefulSet]",
        "--to",
        "shop/web[Deployment]",
        "--port",
        "http",
    ]);
    assert!(
        stdout(&o).contains("ingress rule 0: from ipBlock 10.20.0.0/16 (the workload has no address yet: taken as outside, depends on the address)"),
        "{}",
        stdout(&o)
    );
    let o = palisade(&["matrix", "-f", "examples/shop", "-o", "html"]);
    let data = page_data(&stdout(&o));
    // every cell into web (column 2) on both probes: web admits an ipBlock
    let mut depends = Vec::new();
    for p in 0..2 {
        for r in 0..3 {
            for c in 0..3 {
                if page_cell(&data, p, r, c).is_some_and(|k| k[3] == 1) {
                    depends.push([p, r, c]);
                }
            }
        }
    }
    assert_eq!(
        depends,
        [
            [0, 0, 2],
            [0, 1, 2],
            [0, 2, 2],
            [1, 0, 2],
            [1, 1, 2],
            [1, 2, 2]
        ],
        "the page marks them too"
    );
}

#[test]
fn pods_without_an_address_are_one_notice() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x}\nstatus: {podIP: 10.0.0.1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: x}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p2, namespace: x}\n";
    let o = palisade_stdin(&["matrix", "-f", "-", "--ports", "80", "-o", "jsonl"], yaml);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("<stdin>:5: notice: 2 pod(s) without an address (Pending or completed), left out of the matrix (--verbose lists them)"),
        "{err}"
    );
    assert!(!err.contains("x/p2"), "the list only with --verbose: {err}");
    let o = palisade_stdin(
        &["matrix", "-f", "-", "--ports", "80", "-o", "jsonl", "-v"],
        yaml,
    );
    assert!(
        stderr(&o).contains(
            "<stdin>:9: notice: Pod x/p2: status.podIP: no address (Pending, or completed"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn allowed_ports_merge_across_rules() {
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: x}\nstatus: {podIP: 10.0.0.1}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: x}\nstatus: {podIP: 10.0.0.2}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: b, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{port: 80}]}, {ports: [{port: 81, endPort: 90}, {protocol: UDP, port: 53}]}]\n";
    let o = palisade_stdin(&["eval", "-f", "-", "--from", "x/a", "--to", "x/b"], yaml);
    let out = stdout(&o);
    assert!(
        out.contains("allowed: TCP 80-90; UDP 53; SCTP none\n"),
        "{out}"
    );
    assert!(
        out.contains("TCP 80: ALLOWED\n") && out.contains("TCP 81-90: ALLOWED\n"),
        "each rule's run still listed: {out}"
    );
}
