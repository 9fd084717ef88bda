//! Manifest loading from YAML text: never panics; strict and `skip_invalid` loading agree;
//! whatever loads compiles and evaluates consistently.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let loaded = palisade_fuzz::load_both(text);
    if let Some(engine) = palisade_fuzz::small_engine(loaded.cluster, Default::default()) {
        palisade_fuzz::exercise(&engine);
    }
});
