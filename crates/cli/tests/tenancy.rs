//! `palisade tenancy`: inputs as every other `-f` takes them, validated options, output that
//! names cannot inject into, and YAML that reads back as what was compiled.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{palisade, palisade_stdin, stderr, stdout};

/// The documents of a YAML text, as Palisade's loader reads them.
fn documents(text: &str) -> Vec<serde_json::Value> {
    palisade_model::yaml::parse_documents(text)
        .unwrap()
        .into_iter()
        .map(|d| d.value)
        .collect()
}

#[test]
fn tenancy_f_takes_directories_and_stdin() {
    let files = palisade(&[
        "tenancy",
        "compile",
        "-f",
        "examples/tenancy/base.yaml",
        "examples/tenancy/config.yaml",
    ]);
    assert!(files.status.success(), "{}", stderr(&files));
    let dir = palisade(&["tenancy", "compile", "-f", "examples/tenancy"]);
    assert!(dir.status.success(), "{}", stderr(&dir));
    assert_eq!(
        stdout(&dir),
        stdout(&files),
        "a directory reads its files in name order"
    );
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/tenancy/config.yaml"
    ))
    .unwrap();
    let stdin = palisade_stdin(
        &[
            "tenancy",
            "compile",
            "-f",
            "examples/tenancy/base.yaml",
            "-",
        ],
        &config,
    );
    assert!(stdin.status.success(), "{}", stderr(&stdin));
    assert_eq!(stdout(&stdin), stdout(&files));
    let check = palisade(&["tenancy", "check", "-f", "examples/tenancy/"]);
    assert!(check.status.success(), "{}", stderr(&check));
    assert!(stdout(&check).starts_with("ok: 2 groups, 3 tools, 3 policies, 2 base policies"));
}

/// Bug: a tool named "t\n---\nkind: NetworkPolicy..." put that document into the output
/// and exited 0.
#[test]
fn tenancy_compile_refuses_a_tool_name_that_injects_a_document() {
    let config = "groups: [corn]\ntools:\n  - name: \"t\\n---\\nkind: NetworkPolicy\\napiVersion: networking.k8s.io/v1\\nmetadata: {name: evil, namespace: corn}\\nspec: {podSelector: {}, ingress: [{}]}\"\n    group: corn\n";
    let o = palisade_stdin(&["tenancy", "compile", "-f", "-"], config);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).is_empty());
    assert!(
        stderr(&o).contains("<stdin>:3: error: tools[0].name: tool name: invalid label value"),
        "{}",
        stderr(&o)
    );
}

/// Bug: a tool named "t\n[" made the output unparseable.
#[test]
fn tenancy_compile_refuses_a_tool_name_that_breaks_the_output() {
    let o = palisade_stdin(
        &["tenancy", "compile", "-f", "-"],
        "groups: [corn]\ntools:\n  - {name: \"t\\n[\", group: corn}\n",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("<stdin>:3: error: tools[0].name: tool name: invalid label value"),
        "{}",
        stderr(&o)
    );
}

/// Bug: `--platform-label` was not validated: the default base policy then carried a
/// selector that Palisade itself rejects when it reads the output.
#[test]
fn tenancy_platform_label_and_namespace_are_validated() {
    let config = "examples/tenancy/config.yaml";
    for bad in [
        ["--platform-label", "app=a b"],
        ["--platform-label", "bad key=api"],
        ["--platform-label", "app=x\n---\nkind: List"],
        ["--platform-namespace", "Not_A_Namespace"],
    ] {
        let o = palisade(&["tenancy", "compile", "-f", config, bad[0], bad[1]]);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("invalid platform option"),
            "{}",
            stderr(&o)
        );
        assert!(stdout(&o).is_empty());
    }
    let o = palisade(&[
        "tenancy",
        "compile",
        "-f",
        config,
        "--platform-namespace",
        "tools-api",
        "--platform-label",
        "app.kubernetes.io/name=api",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let yaml = stdout(&o);
    assert!(
        yaml.contains("kubernetes.io/metadata.name: tools-api"),
        "{yaml}"
    );
    // The output loads (no pods: the matrix itself is refused as empty, not as invalid).
    let m = palisade_stdin(&["matrix", "-f", "-", "-o", "summary"], &yaml);
    let invalid = stderr(&m)
        .lines()
        .any(|l| l.starts_with("<stdin>:") && l.contains(": error: "));
    assert!(!invalid, "{}", stderr(&m));
    assert!(
        stderr(&m).contains("no pod in the input has an address"),
        "{}",
        stderr(&m)
    );
}

/// Emit → load → the same objects: the YAML documents are the JSON list's items.
#[test]
fn tenancy_yaml_reads_back_as_the_json() {
    let yaml = palisade(&["tenancy", "compile", "-f", "examples/tenancy"]);
    let json = palisade(&["tenancy", "compile", "-f", "examples/tenancy", "-o", "json"]);
    assert!(yaml.status.success() && json.status.success());
    let list: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        serde_json::Value::Array(documents(&stdout(&yaml))),
        list["items"]
    );
}

/// The default base policy names a neutral platform namespace, not a product's.
#[test]
fn tenancy_default_platform_is_neutral() {
    let o = palisade(&["tenancy", "compile", "-f", "examples/tenancy/config.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let yaml = stdout(&o);
    assert!(
        yaml.contains("kubernetes.io/metadata.name: platform"),
        "{yaml}"
    );
    assert!(yaml.contains("tenancy.palisade.io/policies: platform-default"));
    assert!(!yaml.to_lowercase().contains("thorium"));
}

#[test]
fn compile_neutron_yaml_reads_back_as_the_json() {
    let args = ["compile", "--target", "neutron", "-f", "examples/xyz"];
    let ignore = "--ignore-admin-policies";
    let json = palisade(&[&args[..], &[ignore]].concat());
    let yaml = palisade(&[&args[..], &[ignore, "-o", "yaml"]].concat());
    assert!(json.status.success(), "{}", stderr(&json));
    assert!(yaml.status.success(), "{}", stderr(&yaml));
    let want: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(documents(&stdout(&yaml)), [want]);
}

#[test]
fn tenancy_refuses_an_empty_directory_or_empty_stdin() {
    let dir = std::env::temp_dir().join(format!("palisade-tenancy-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = palisade(&["tenancy", "check", "-f", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("error: no manifests: no *.yaml, *.yml or *.json file in the input"),
        "{}",
        stderr(&o)
    );
    let o = palisade_stdin(&["tenancy", "compile", "-f", "-"], "\n");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("<stdin>:1: error: no objects: the input holds no YAML or JSON document"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
