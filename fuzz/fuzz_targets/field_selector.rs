//! Field selectors: see `selector::invariants` for what every input must satisfy.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    selector::invariants::check_field_selector(&String::from_utf8_lossy(data));
});
