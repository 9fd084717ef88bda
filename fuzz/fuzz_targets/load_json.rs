//! Manifest loading from JSON text: JSON is YAML, so the YAML reader must read every JSON
//! document to the value a JSON parser reads (numbers compared as numbers), and loading
//! behaves as for YAML.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

/// Numbers as f64, so that `1`, `1.0` and `1e0` compare by value.
fn normalize(v: &Value) -> Value {
    match v {
        Value::Number(n) => n
            .as_f64()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number),
        Value::Array(a) => Value::Array(a.iter().map(normalize).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
        }
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(json) = serde_json::from_str::<Value>(text) else {
        return;
    };
    match palisade_model::yaml::parse_documents(text) {
        Ok(docs) => {
            let got: Vec<Value> = docs.iter().map(|d| normalize(&d.value)).collect();
            let want: Vec<Value> = if json.is_null() {
                vec![]
            } else {
                vec![normalize(&json)]
            };
            assert_eq!(got, want, "the YAML reader reads this JSON differently");
        }
        // Duplicate keys are refused on purpose (kubectl refuses them).
        Err(e) => assert!(
            e.message.to_lowercase().contains("duplicate"),
            "valid JSON refused by the YAML reader: {e}"
        ),
    }
    let loaded = palisade_fuzz::load_both(text);
    if let Some(engine) = palisade_fuzz::small_engine(loaded.cluster, Default::default()) {
        palisade_fuzz::exercise(&engine);
    }
});
