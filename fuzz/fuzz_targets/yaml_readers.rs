//! The fast reader of block-style YAML and the full YAML parser read every text alike: the
//! same documents, the same line for every node, the same errors.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let [fast, full] = palisade_model::yaml::readings(text);
    assert_eq!(fast, full, "{text:?}");
});
