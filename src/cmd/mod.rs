//! Subcommands of the `rudder` binary.

pub mod serve;
pub mod validate;
