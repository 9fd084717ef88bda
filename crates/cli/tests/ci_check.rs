//! The CI check: the composite action (`action.yml`) and its steps (`deploy/ci/check.sh`)
//! run against a scratch git repository as GitHub runs them (`GITHUB_OUTPUT`, the tools
//! on PATH), the workflow that uses the action, and the pre-commit hook's command.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{stderr, stdout};
use palisade_test_support::git::repo_with_copy;
use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap();
    let mut docs = palisade_model::yaml::parse_documents(&text).unwrap();
    assert_eq!(docs.len(), 1, "{path}");
    docs.remove(0).value
}

/// A scratch repository with examples/xyz committed, and a directory holding `palisade`
/// (the test binary) to put on PATH.
struct Scratch {
    repo: tempfile::TempDir,
    bin: tempfile::TempDir,
    output: std::path::PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let repo = tempfile::tempdir().unwrap();
        repo_with_copy(repo.path(), &Path::new(ROOT).join("examples/xyz"), "xyz");
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_palisade"), bin.path().join("palisade"))
            .unwrap();
        let output = bin.path().join("github-output");
        Scratch { repo, bin, output }
    }

    /// `deploy/ci/check.sh ARGS` in the repository, with `env`.
    fn check(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new(Path::new(ROOT).join("deploy/ci/check.sh"))
            .args(args)
            .current_dir(self.repo.path())
            .env("PATH", path)
            .env("GITHUB_OUTPUT", &self.output)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    fn outputs(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }
}

#[test]
fn lint_writes_sarif_and_reports_findings_without_failing_before_the_upload() {
    let s = Scratch::new();
    let o = s.check(
        &["lint"],
        &[("PALISADE_PATHS", "xyz"), ("PALISADE_FAIL_ON", "warning")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("warning[PAL006 pass-to-nothing]"),
        "{}",
        stdout(&o)
    );
    assert_eq!(s.outputs(), "findings=3\n");
    let sarif: Value =
        serde_json::from_slice(&std::fs::read(s.repo.path().join("palisade.sarif")).unwrap())
            .unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{sarif}");
    assert_eq!(results[0]["ruleId"], "PAL006");
    // The last step fails the check on those findings.
    let o = s.check(&["verdict", "3"], &[("PALISADE_PATHS", "xyz")]);
    assert_eq!(o.status.code(), Some(1));
    let o = s.check(&["verdict", "0"], &[("PALISADE_PATHS", "xyz")]);
    assert!(o.status.success());

    // At the default (error), the warning does not count.
    let s = Scratch::new();
    let o = s.check(&["lint"], &[("PALISADE_PATHS", "xyz")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(s.outputs(), "findings=0\n");
}

#[test]
fn diff_writes_the_comment_with_its_marker() {
    let s = Scratch::new();
    let env = [("PALISADE_PATHS", "xyz"), ("PALISADE_BASE", "main")];
    let o = s.check(&["diff"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(s.outputs(), "changed=false\n");
    let md = std::fs::read_to_string(s.repo.path().join("palisade-diff.md")).unwrap();
    assert_eq!(
        md,
        "<!-- palisade-diff -->\n#### Palisade: no connection changes against `main`\n"
    );

    std::fs::remove_file(s.repo.path().join("xyz/policies/01-deny-ingress-x.yaml")).unwrap();
    let o = s.check(&["diff"], &env);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(s.outputs(), "changed=false\nchanged=true\n");
    let md = std::fs::read_to_string(s.repo.path().join("palisade-diff.md")).unwrap();
    assert!(
        md.starts_with(
            "<!-- palisade-diff -->\n#### Palisade: connections changed against `main`\n\n**"
        ),
        "{md}"
    );
    assert!(
        md.contains("| from | to | ports | pairs | before |"),
        "{md}"
    );
    assert_eq!(
        stdout(&o),
        md,
        "the step prints the report for the job summary"
    );

    // A wrong ref fails the step, naming it.
    let o = s.check(
        &["diff"],
        &[("PALISADE_PATHS", "xyz"), ("PALISADE_BASE", "nope")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--base nope: no such commit"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_action_runs_the_check_steps_with_the_inputs_it_declares() {
    let action = yaml("action.yml");
    assert_eq!(action["runs"]["using"], "composite");
    let inputs = action["inputs"].as_object().unwrap();
    assert!(inputs["paths"]["required"] == true);
    let steps = action["runs"]["steps"].as_array().unwrap();
    let text = serde_json::to_string(steps).unwrap();
    // Every input the steps read is declared.
    for part in text.split("inputs.").skip(1) {
        let name: String = part
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        assert!(inputs.contains_key(&name), "inputs.{name} is not declared");
    }
    // Each check.sh step names a subcommand the script has.
    let script = std::fs::read_to_string(Path::new(ROOT).join("deploy/ci/check.sh")).unwrap();
    let mut used = Vec::new();
    for step in steps {
        if let Some(run) = step["run"].as_str()
            && let Some(rest) = run.split("deploy/ci/check.sh\" ").nth(1)
        {
            let sub = rest.split_whitespace().next().unwrap().trim_matches('\'');
            assert!(
                script.contains(&format!("\n{sub})")),
                "check.sh has no {sub}"
            );
            used.push(sub.to_string());
        }
    }
    assert_eq!(used, ["lint", "diff", "comment", "verdict"]);
    assert!(
        text.contains("github/codeql-action/upload-sarif"),
        "the SARIF log is uploaded"
    );
}

#[test]
fn the_workflow_uses_the_action_on_paths_that_exist() {
    let workflow = yaml(".github/workflows/policy-check.yml");
    let steps = workflow["jobs"]["palisade"]["steps"].as_array().unwrap();
    let step = steps.iter().find(|s| s["uses"] == "./").unwrap();
    for path in step["with"]["paths"].as_str().unwrap().split_whitespace() {
        assert!(Path::new(ROOT).join(path).exists(), "{path}");
    }
    assert_eq!(workflow["permissions"]["security-events"], "write");
    assert_eq!(workflow["permissions"]["pull-requests"], "write");
}

#[test]
fn the_pre_commit_hook_lints_with_the_documented_arguments() {
    let hooks = yaml(".pre-commit-hooks.yaml");
    let hook = &hooks.as_array().unwrap()[0];
    assert_eq!(hook["id"], "palisade-lint");
    assert_eq!(hook["language"], "system");
    assert_eq!(hook["pass_filenames"], false);
    // pre-commit runs `entry` followed by `args`.
    let entry = hook["entry"].as_str().unwrap();
    let mut words = entry.split_whitespace();
    assert_eq!(words.next(), Some("palisade"));
    let o = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(words)
        .args(["-f", "examples/xyz/cluster.yaml", "examples/xyz/policies"])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // A policy with an error fails the commit.
    let bad = tempfile::tempdir().unwrap();
    std::fs::write(
        bad.path().join("bad.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\nspec: {podSelector: {matchLabels: {a: 1}}}\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(entry.split_whitespace().skip(1))
        .arg("-f")
        .arg(bad.path())
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0), "{}", stdout(&o));
}
