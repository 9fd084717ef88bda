//! Regressions for what fuzzing found (inputs kept under fuzz/regressions/TARGET/).

#![allow(missing_docs, clippy::unwrap_used)]

use palisade_tenancy::{Config, Error, Options, State, compile};

/// fuzz/regressions/tenancy/tool-name-with-control-character.yaml: a tool name is a label
/// value's source and is printed in the output's header; a name with a control character
/// (here U+0016; a newline injects YAML) must be refused, not carried into the output.
#[test]
fn a_tool_name_with_a_control_character_is_refused() {
    let parsed = Config::parse([(
        "t.yaml",
        "groups: [g]\ntools: [{name: \"sc\\x16anner\", group: g}]\n",
    )]);
    match parsed {
        Err(Error::Invalid(errors)) => assert!(
            errors.iter().any(|d| d.to_string().contains("tools")),
            "{errors:?}"
        ),
        Err(other) => panic!("{other}"),
        Ok(config) => {
            let out = compile(&config, &Options::default(), &State::default());
            panic!(
                "compiled with tool keys {:?}",
                out.tool_labels.keys().collect::<Vec<_>>()
            )
        }
    }
}
