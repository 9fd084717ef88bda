//! A transaction that the kernel rejects partway leaves the previous ruleset in force:
//! after a failed full replace or a failed incremental update, `nft list` shows the old
//! table unchanged and connections are still decided by it (root only: a fresh network
//! namespace with the pod addresses on its loopback interface, probed with curl).

#![allow(missing_docs, clippy::unwrap_used)]

use std::process::Command;

use palisade_engine::{Engine, Options};
use palisade_nft::{Rule, Ruleset, Verdict, compile};

const XYZ: &str = include_str!("../../../examples/xyz/cluster.yaml");
const DENY_INGRESS_X: &str = include_str!("../../../examples/xyz/policies/01-deny-ingress-x.yaml");

/// x/a, which under DENY_INGRESS_X accepts only y/b on TCP 80.
const X_A: &str = "10.0.0.10";
/// y/a: denied by DENY_INGRESS_X.
const Y_A: &str = "10.0.1.10";
/// y/b: allowed on TCP 80.
const Y_B: &str = "10.0.1.11";

fn ruleset(policies: &str) -> Ruleset {
    let loaded =
        palisade_model::load_sources([("c", XYZ), ("p", policies)], Default::default()).unwrap();
    compile(&Engine::new(loaded.cluster, Options::default()), None).unwrap()
}

fn sh(ns: &str, args: &[&str]) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .args(args)
        .output()
        .unwrap()
}

/// `nft list table inet palisade`, counters masked.
fn list(ns: &str) -> String {
    let out = sh(ns, &["nft", "list", "table", "inet", "palisade"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .map(|l| match l.find("counter packets") {
            Some(i) => format!("{} counter", &l[..i]),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a TCP connection attempt from `src` reaches `dst:port` (nothing listens: a
/// refused connection means the SYN got through, a timeout that it was dropped).
fn reaches(ns: &str, src: &str, dst: &str, port: u16) -> bool {
    let out = sh(
        ns,
        &[
            "curl",
            "-s",
            "--interface",
            src,
            "--connect-timeout",
            "1",
            &format!("http://{dst}:{port}/"),
        ],
    );
    match out.status.code() {
        Some(7) => true,
        Some(28) => false,
        other => panic!(
            "curl {src} -> {dst}:{port}: unexpected exit {other:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

/// `ruleset` with one more rule, at the end of its last chain by name, that jumps to a
/// chain that does not exist: the kernel rejects the transaction there, after the
/// commands before it (the table delete of a full replace, the flushes of an update).
fn broken(ruleset: &Ruleset) -> Ruleset {
    let mut bad = ruleset.clone();
    let last = bad
        .chains
        .iter_mut()
        .max_by(|a, b| a.name.cmp(&b.name))
        .unwrap();
    std::sync::Arc::make_mut(&mut last.rules).push(Rule {
        matches: vec![],
        verdict: Verdict::Goto("no_such_chain".into()),
        log: None,
    });
    bad
}

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn a_rejected_transaction_leaves_the_previous_ruleset_in_force() {
    if !palisade_test_support::require_root(
        "a_rejected_transaction_leaves_the_previous_ruleset_in_force",
    ) {
        return;
    }
    if Command::new("curl").arg("--version").output().is_err() {
        palisade_test_support::unavailable(
            "a_rejected_transaction_leaves_the_previous_ruleset_in_force",
            "needs curl to probe connections",
        );
        return;
    }
    let ns = Netns(format!("palisade-fc-{}", std::process::id()));
    let ns = ns.0.as_str();
    assert!(
        Command::new("ip")
            .args(["netns", "add", ns])
            .status()
            .unwrap()
            .success()
    );
    assert!(sh(ns, &["ip", "link", "set", "lo", "up"]).status.success());
    for ip in [X_A, Y_A, Y_B] {
        assert!(
            sh(ns, &["ip", "addr", "add", &format!("{ip}/32"), "dev", "lo"])
                .status
                .success()
        );
    }

    let old = ruleset(DENY_INGRESS_X);
    let open = ruleset("");
    palisade_nft::apply(&old, Some(ns)).unwrap();
    let before = list(ns);
    let in_force = |what: &str| {
        assert_eq!(list(ns), before, "{what}: the table changed");
        assert!(
            !reaches(ns, Y_A, X_A, 80),
            "{what}: y/a reaches x/a, the old ruleset is not in force"
        );
        assert!(
            reaches(ns, Y_B, X_A, 80),
            "{what}: y/b no longer reaches x/a"
        );
    };
    in_force("after the first apply");

    // A full replace (delete table, then the new table) rejected at its last chain.
    let err = palisade_nft::apply(&broken(&open), Some(ns)).unwrap_err();
    assert!(
        matches!(err.source, palisade_nft::KernelFailure::Rejected(_)),
        "{err}"
    );
    in_force("after a rejected full replace");

    // An incremental update (flushes and refills of the changed chains) rejected partway.
    let (script, _) = palisade_nft::update_script(&old, &broken(&open));
    let bad_at = script
        .lines()
        .position(|l| l.contains("no_such_chain"))
        .unwrap();
    assert!(
        bad_at > 0,
        "the bad command is not the first one:\n{script}"
    );
    let err = palisade_nft::update(&old, &broken(&open), Some(ns)).unwrap_err();
    assert!(
        matches!(err.source, palisade_nft::KernelFailure::Rejected(_)),
        "{err}"
    );
    in_force("after a rejected incremental update");

    // An update switched over by netlink, refused by the kernel at a map element that
    // jumps to no chain, after the batch created the new chains: the batch is all or
    // nothing.
    let mut dangling = open.clone();
    let last = dangling.ingress.last_mut().unwrap();
    last.1 = "no_such_chain".into();
    let err = palisade_nft::update(&old, &dangling, Some(ns)).unwrap_err();
    assert!(
        matches!(&err.source, palisade_nft::KernelFailure::Rejected(m) if m.contains("ingress")),
        "{err}"
    );
    in_force("after a refused netlink batch");

    // The same, with a new chain whose rule netlink does not carry (a match on every
    // address, `/0`): the new chains are prepared by nft -f first, and taken away again
    // when the batch is refused.
    let mut new_chain = dangling.chains[0].clone();
    new_chain.name = "n000000000000".into();
    assert!(!old.chains.iter().any(|o| o.name == new_chain.name));
    std::sync::Arc::make_mut(&mut new_chain.rules).insert(
        0,
        Rule {
            matches: vec![palisade_nft::Match::Addr {
                field: palisade_nft::Field::Saddr,
                v6: false,
                nets: vec!["0.0.0.0/0".parse().unwrap()],
                negate: false,
            }],
            verdict: Verdict::Return,
            log: None,
        },
    );
    dangling.chains.push(new_chain);
    let err = palisade_nft::update(&old, &dangling, Some(ns)).unwrap_err();
    assert!(
        matches!(&err.source, palisade_nft::KernelFailure::Rejected(m) if m.contains("ingress")),
        "{err}"
    );
    in_force("after a refused netlink batch whose chains nft -f prepared");

    // The probes tell the rulesets apart: the open ruleset, applied, lets y/a in.
    palisade_nft::apply(&open, Some(ns)).unwrap();
    assert!(
        reaches(ns, Y_A, X_A, 80),
        "the open ruleset should let y/a reach x/a"
    );
}
