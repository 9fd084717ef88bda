//! Real packets: a network-namespace node with the compiled ruleset loaded must allow and
//! deny exactly what the evaluator says. Needs root (CI runs as root); skipped otherwise.

#![allow(missing_docs, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const EXE: &str = env!("CARGO_BIN_EXE_palisade");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const CLUSTER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/xyz/cluster.yaml"
);

fn root() -> bool {
    let ok = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        && Command::new("nft").arg("--version").output().is_ok()
        && Command::new("conntrack").arg("--version").output().is_ok();
    if !ok {
        eprintln!("skipped: kernel tests need root, nft and conntrack");
    }
    ok
}

/// A lab that is torn down when dropped (also when the test panics).
struct Lab(String);

impl Lab {
    fn up(tag: &str) -> Lab {
        let name = format!("{tag}{}", std::process::id() % 100_000);
        let o = palisade(&["lab", "up", "-f", CLUSTER, "--name", &name]);
        assert!(
            o.status.success(),
            "lab up: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Lab(name)
    }
    fn netns(&self, pod: usize) -> String {
        format!("{}-p{pod}", self.0)
    }
    fn node(&self) -> String {
        format!("{}-node", self.0)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = palisade(&["lab", "down", "--name", &self.0]);
    }
}

fn palisade(args: &[&str]) -> std::process::Output {
    Command::new(EXE)
        .args(args)
        .current_dir(ROOT)
        .output()
        .unwrap()
}

fn write_policy(dir: &std::path::Path, name: &str, yaml: &str) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Policy sets over the e2e model (namespaces x, y, z labelled ns=<name>; pods a, b, c
/// labelled pod=<name>; ports 80 and 81 on TCP and UDP; external host 192.0.2.10).
const SETS: &[(&str, &str)] = &[
    ("none", ""),
    (
        "deny-ingress-x",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: x}\nspec: {podSelector: {}}\n",
    ),
    (
        "deny-egress-x",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: x}\nspec: {podSelector: {}, policyTypes: [Egress]}\n",
    ),
    (
        "deny-both-y",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: y}\nspec: {podSelector: {}, policyTypes: [Ingress, Egress]}\n",
    ),
    (
        "allow-all-after-deny",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: x}\nspec: {podSelector: {}}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: a, namespace: x}\nspec: {podSelector: {}, ingress: [{}]}\n",
    ),
    (
        "pod-selector",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]\n",
    ),
    (
        "namespace-selector",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: n, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: y}}}]}]\n",
    ),
    (
        "and-selectors",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: n, namespace: x}\nspec:\n  podSelector: {}\n  ingress: [{from: [{namespaceSelector: {matchLabels: {ns: y}}, podSelector: {matchLabels: {pod: c}}}]}]\n",
    ),
    (
        "match-expressions",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: e, namespace: y}\nspec:\n  podSelector: {matchExpressions: [{key: pod, operator: In, values: [a, b]}]}\n  ingress: [{from: [{namespaceSelector: {matchExpressions: [{key: ns, operator: NotIn, values: [x]}]}}]}]\n",
    ),
    (
        "named-port-ingress",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: n, namespace: z}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{port: serve-81-udp, protocol: UDP}, {port: serve-80-tcp}]}]\n",
    ),
    (
        "named-port-egress",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: n, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  policyTypes: [Egress]\n  egress: [{ports: [{port: serve-81-tcp}]}]\n",
    ),
    (
        "end-port",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: r, namespace: y}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{protocol: TCP, port: 79, endPort: 80}, {protocol: UDP, port: 81, endPort: 81}]}]\n",
    ),
    (
        "ipblock-except",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: c, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  policyTypes: [Egress]\n  egress: [{to: [{ipBlock: {cidr: 10.0.0.0/16, except: [10.0.1.0/24, 10.0.2.12/32]}}]}]\n",
    ),
    (
        "egress-to-external",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: e, namespace: z}\nspec:\n  podSelector: {}\n  policyTypes: [Egress]\n  egress: [{to: [{ipBlock: {cidr: 192.0.2.0/24}}], ports: [{port: 80}]}]\n",
    ),
    (
        "ingress-from-external-only",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: e, namespace: y}\nspec:\n  podSelector: {}\n  ingress: [{from: [{ipBlock: {cidr: 192.0.2.10/32}}]}]\n",
    ),
    (
        "egress-only-types",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: t, namespace: x}\nspec:\n  podSelector: {}\n  policyTypes: [Egress]\n  ingress: [{from: [{podSelector: {matchLabels: {pod: nobody}}}]}]\n  egress: [{to: [{namespaceSelector: {}}]}]\n",
    ),
    (
        "additive",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: b, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}], ports: [{port: 80}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: c, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  ingress: [{from: [{podSelector: {matchLabels: {pod: c}}}], ports: [{port: 81, protocol: UDP}]}]\n",
    ),
    (
        "udp-only",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: u, namespace: z}\nspec:\n  podSelector: {}\n  ingress: [{ports: [{protocol: UDP}]}]\n",
    ),
    (
        "anp-deny-over-np",
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: d}\nspec:\n  priority: 20\n  subject: {namespaces: {matchLabels: {ns: x}}}\n  ingress: [{action: Deny, from: [{namespaces: {matchLabels: {ns: y}}}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: a, namespace: x}\nspec: {podSelector: {}, ingress: [{}]}\n",
    ),
    (
        "anp-allow-over-isolation",
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: a}\nspec:\n  priority: 5\n  subject: {namespaces: {}}\n  ingress: [{action: Allow, from: [{pods: {namespaceSelector: {matchLabels: {ns: z}}, podSelector: {matchLabels: {pod: c}}}}], ports: [{portNumber: {protocol: TCP, port: 80}}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: x}\nspec: {podSelector: {}}\n",
    ),
    (
        "anp-pass-and-priorities",
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: pass}\nspec:\n  priority: 10\n  subject: {namespaces: {matchLabels: {ns: x}}}\n  ingress: [{action: Pass, from: [{namespaces: {matchLabels: {ns: x}}}]}]\n---\napiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: deny}\nspec:\n  priority: 20\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}], ports: [{portRange: {protocol: TCP, start: 80, end: 81}}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: a, namespace: x}\nspec:\n  podSelector: {matchLabels: {pod: a}}\n  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}]}]\n",
    ),
    (
        "banp-after-np",
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: BaselineAdminNetworkPolicy\nmetadata: {name: default}\nspec:\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: open, namespace: y}\nspec: {podSelector: {}, ingress: [{from: [{namespaceSelector: {matchLabels: {ns: x}}}]}]}\n",
    ),
    (
        "cnp-both-tiers",
        "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: admin}\nspec:\n  tier: Admin\n  priority: 3\n  subject: {namespaces: {}}\n  egress:\n  - {action: Accept, to: [{namespaces: {matchLabels: {ns: z}}}], protocols: [{udp: {destinationPort: {number: 80}}}]}\n  - {action: Pass, to: [{pods: {namespaceSelector: {}, podSelector: {matchLabels: {pod: a}}}}], protocols: [{tcp: {destinationPort: {range: {start: 80, end: 81}}}}]}\n---\napiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: baseline}\nspec:\n  tier: Baseline\n  priority: 1\n  subject: {namespaces: {}}\n  egress: [{action: Deny, to: [{namespaces: {}}]}]\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: y}\nspec: {podSelector: {}, policyTypes: [Egress]}\n",
    ),
    (
        "cnp-baseline-pass",
        "apiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: p}\nspec:\n  tier: Baseline\n  priority: 1\n  subject: {namespaces: {}}\n  ingress: [{action: Pass, from: [{namespaces: {matchLabels: {ns: x}}}]}]\n---\napiVersion: policy.networking.k8s.io/v1alpha2\nkind: ClusterNetworkPolicy\nmetadata: {name: d}\nspec:\n  tier: Baseline\n  priority: 2\n  subject: {namespaces: {}}\n  ingress: [{action: Deny, from: [{namespaces: {}}]}]\n",
    ),
    (
        "anp-same-namespace",
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: r}\nspec:\n  priority: 10\n  subject: {namespaces: {}}\n  ingress:\n  - {action: Allow, from: [{pods: {namespaces: {related: Self}, podSelector: {matchLabels: {pod: b}}}}]}\n  - {action: Deny, from: [{namespaces: {notSameLabels: [ns]}}]}\n",
    ),
    (
        "anp-networks-external",
        "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\nmetadata: {name: n}\nspec:\n  priority: 1\n  subject: {namespaces: {matchLabels: {ns: x}}}\n  egress:\n  - {action: Deny, to: [{networks: [192.0.2.0/24]}]}\n  - {action: Allow, to: [{networks: [10.0.2.0/24]}], ports: [{portNumber: {protocol: UDP, port: 81}}]}\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: d, namespace: x}\nspec: {podSelector: {}, policyTypes: [Egress]}\n",
    ),
];

#[test]
fn the_kernel_matrix_equals_the_evaluator_matrix() {
    if !root() {
        return;
    }
    assert!(SETS.len() >= 25);
    let lab = Lab::up("km");
    let dir = std::env::temp_dir().join(format!("palisade-kernel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for (name, yaml) in SETS {
        let policy = write_policy(&dir, name, yaml);
        let o = palisade(&[
            "lab", "apply", "-f", CLUSTER, "-f", &policy, "--name", &lab.0,
        ]);
        assert!(
            o.status.success(),
            "{name}: apply: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = palisade(&[
            "lab",
            "probe",
            "-f",
            CLUSTER,
            "-f",
            &policy,
            "--name",
            &lab.0,
            "--ports",
            "80,81",
            "--protocols",
            "TCP,UDP",
            "-o",
            "jsonl",
            "--compare",
        ]);
        let lines = String::from_utf8_lossy(&o.stdout).lines().count();
        if !o.status.success() || lines != 4 * 10 * 10 {
            failures.push(format!(
                "{name} ({lines} lines): {}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        failures.is_empty(),
        "{} of {} policy sets disagree:\n{}",
        failures.len(),
        SETS.len(),
        failures.join("\n")
    );
}

#[test]
fn an_established_connection_is_cut_within_a_second_of_a_tightening_policy() {
    if !root() {
        return;
    }
    let lab = Lab::up("kc");
    let dir = std::env::temp_dir().join(format!("palisade-cut-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let open = write_policy(&dir, "open", "");
    let deny = write_policy(&dir, "deny", SETS[3].1); // deny-both-y
    assert!(
        palisade(&["lab", "apply", "-f", CLUSTER, "-f", &open, "--name", &lab.0])
            .status
            .success()
    );
    // x/a (pod 0) holds a TCP connection to y/b (10.0.1.11:80), exchanging a byte every 50 ms.
    let mut hold = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.netns(0),
            EXE,
            "lab",
            "hold",
            "--to",
            "10.0.1.11:80",
            "--millis",
            "3500",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let reader = BufReader::new(hold.stdout.take().unwrap());
    let lines = std::thread::spawn(move || {
        reader
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    std::thread::sleep(Duration::from_millis(1200));
    let tightened = now_ms();
    let o = palisade(&["lab", "apply", "-f", CLUSTER, "-f", &deny, "--name", &lab.0]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    hold.wait().unwrap();
    let events: Vec<(bool, u128)> = lines
        .join()
        .unwrap()
        .iter()
        .filter_map(|l| {
            let (k, t) = l.split_once(' ')?;
            Some((k == "ok", t.parse().ok()?))
        })
        .collect();
    assert!(
        events.iter().any(|(ok, t)| *ok && *t < tightened),
        "the connection worked before: {events:?}"
    );
    let last_ok = events
        .iter()
        .filter(|(ok, _)| *ok)
        .map(|(_, t)| *t)
        .max()
        .unwrap();
    assert!(
        last_ok < tightened + 1000,
        "still exchanging {} ms after the policy: {events:?}",
        last_ok - tightened
    );
    assert!(
        events.iter().any(|(ok, t)| !*ok && *t > tightened),
        "no failed exchange after the policy: {events:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn random_updates_under_continuous_probing_never_let_a_forbidden_probe_through() {
    if !root() {
        return;
    }
    let lab = Lab::up("ku");
    let cluster_text = std::fs::read_to_string(CLUSTER).unwrap();
    let engine_for = |set: usize| {
        let loaded = palisade_model::load_sources(
            [("c", cluster_text.as_str()), ("p", SETS[set].1)],
            Default::default(),
        )
        .unwrap();
        palisade_engine::Engine::new(loaded.cluster, Default::default())
    };
    let pods: Vec<IpAddr> = (0..9)
        .map(|i| format!("10.0.{}.{}", i / 3, 10 + i % 3).parse().unwrap())
        .collect();
    // Continuous TCP probing from every pod to every other pod on port 80, in rounds.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let (stop, lab_name) = (stop.clone(), lab.0.clone());
        let pods = pods.clone();
        std::thread::spawn(move || {
            let mut results = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let children: Vec<_> = (0..9)
                    .map(|i| {
                        let targets: Vec<String> = pods
                            .iter()
                            .enumerate()
                            .filter(|(j, _)| *j != i)
                            .map(|(_, ip)| format!("{ip}:80/TCP"))
                            .collect();
                        let ns = format!("{lab_name}-p{i}");
                        (
                            pods[i],
                            Command::new("ip")
                                .args(["netns", "exec", &ns, EXE, "lab", "probe-batch"])
                                .args(&targets)
                                .stdout(Stdio::piped())
                                .spawn()
                                .unwrap(),
                        )
                    })
                    .collect();
                for (src, child) in children {
                    let out = child.wait_with_output().unwrap();
                    for line in String::from_utf8_lossy(&out.stdout).lines() {
                        if let Some(r) = palisade_lab::ProbeResult::parse(line) {
                            results.push((src, r));
                        }
                    }
                }
            }
            results
        })
    };
    // 200 updates, each one nft transaction, chosen by a fixed pseudo-random sequence.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut current = 0usize;
    let mut engine = engine_for(current);
    let mut ruleset = palisade_nft::compile(&engine, None).unwrap();
    palisade_nft::apply(&ruleset, Some(&lab.node())).unwrap();
    // (policy set, in force from, until): micros since the epoch.
    let mut history: Vec<(usize, u128, u128)> = vec![(0, 0, u128::MAX)];
    for _ in 0..200 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let next = (state % SETS.len() as u64) as usize;
        let next_engine = engine_for(next);
        let next_rules = palisade_nft::compile(&next_engine, None).unwrap();
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros();
        palisade_nft::update(&ruleset, &next_rules, Some(&lab.node())).unwrap();
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros();
        // the old set may be in force until the transaction is done; the new one from its start
        history.last_mut().unwrap().2 = after;
        history.push((next, before, u128::MAX));
        (current, engine, ruleset) = (next, next_engine, next_rules);
        std::thread::sleep(Duration::from_millis(15));
    }
    let _ = (current, engine);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let results = prober.join().unwrap();
    let engines: Vec<palisade_engine::Engine> = (0..SETS.len()).map(engine_for).collect();
    let mut leaks = Vec::new();
    let mut reached = 0;
    for (src, r) in &results {
        if !r.reached {
            continue; // a failed probe proves nothing (it may have timed out across an update)
        }
        reached += 1;
        let allowed_somewhere = history
            .iter()
            .filter(|(_, from, until)| *from <= r.end_us && r.start_us <= *until)
            .any(|(set, _, _)| {
                let e = &engines[*set];
                let flow = palisade_engine::Flow {
                    src: e.endpoint_for_ip(*src),
                    dst: e.endpoint_for_ip(r.target.ip),
                    protocol: r.target.protocol,
                    port: r.target.port,
                };
                e.evaluate(&flow).allowed
            });
        if !allowed_somewhere {
            leaks.push(format!(
                "{src} -> {} reached at {}..{}",
                r.target, r.start_us, r.end_us
            ));
        }
    }
    assert!(results.len() > 500, "too few probes ran: {}", results.len());
    assert!(
        reached > 100,
        "too few probes got through to judge: {reached}"
    );
    assert!(
        leaks.is_empty(),
        "{} forbidden probes got through:\n{}",
        leaks.len(),
        leaks.join("\n")
    );
}
