//! The tenancy compiler: any configuration either fails with diagnostics or compiles to
//! NetworkPolicies that Palisade itself loads without error, whose YAML rendering has
//! exactly one document per NetworkPolicy, with tool labels that are valid Kubernetes labels (so no tool
//! or group name can inject text into the output), and a state file that round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_tenancy::{Config, Error, Options, State, compile};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let config = match Config::parse([("config.yaml", text)]) {
        Ok(c) => c,
        Err(Error::Invalid(diags)) => {
            assert!(!diags.is_empty(), "a failed parse reports why");
            return;
        }
        Err(e) => panic!("parsing in memory can only find the configuration invalid: {e}"),
    };
    let out = compile(&config, &Options::default(), &State::default());
    for (tool, labels) in &out.tool_labels {
        assert!(
            !tool.chars().any(char::is_control),
            "control character in tool key {tool:?}"
        );
        for (k, v) in labels {
            assert!(
                palisade_fuzz::ref_qualified_name(k),
                "tool {tool:?}: invalid label key {k:?}"
            );
            assert!(
                palisade_fuzz::ref_label_value(v),
                "tool {tool:?}: invalid label value {v:?}"
            );
        }
    }
    // The output exactly as `tenancy compile` writes it: one document per NetworkPolicy.
    let yaml = out.to_yaml().expect("the output renders");
    let docs = palisade_model::yaml::parse_documents(&yaml).expect("the output is YAML");
    assert_eq!(
        docs.len(),
        out.network_policies.len(),
        "one document per NetworkPolicy:\n{yaml}"
    );
    if out.network_policies.is_empty() {
        return;
    }
    match palisade_fuzz::load(&yaml, false) {
        Ok(l) => assert_eq!(
            l.cluster.network_policies.len(),
            out.network_policies.len(),
            "every generated NetworkPolicy loads"
        ),
        Err(e) => panic!("Palisade refuses its own tenancy output: {e:?}\n{yaml}"),
    }
    let state = out.state.render().expect("the state renders");
    assert_eq!(
        State::parse(&state).ok().as_ref(),
        Some(&out.state),
        "state round trip:\n{state}"
    );
});
