#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rudder::robustness::config_yaml(data));
