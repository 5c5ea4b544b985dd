//! Subcommands of the `rudder` binary.

pub mod log;
pub mod serve;
pub mod validate;
