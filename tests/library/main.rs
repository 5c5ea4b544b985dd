//! Library-level tests: the shape rules, Istio's validation corpus and fixtures, and the
//! fuzzers' regressions, through the library's API without a daemon. Run one file with
//! `cargo test --test library architecture::`.

mod architecture;
mod field_walk;
mod istio_fields;
mod parse_fixtures;
mod validation_parity;
mod validation_rules;

#[cfg(feature = "fuzzing")]
mod fuzz_regressions;
