//! etemenanki-compiler: the `.et` and TOML front ends, lowering, validation
//! and diagnostics behind the `etc` binary.

pub mod config;
