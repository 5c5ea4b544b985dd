#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rudder::robustness::discovery_request(data));
