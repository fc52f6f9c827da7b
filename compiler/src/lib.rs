//! etemenanki-compiler: the `.et` and TOML front ends, lowering, validation
//! and diagnostics behind the `etc` binary.

pub mod codes;
pub mod config;
pub mod diagnostic;
pub mod syntax;
