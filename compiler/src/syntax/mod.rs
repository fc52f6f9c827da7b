//! The front ends: each turns source text into a [`Config`].

pub mod et;
pub mod toml;

use crate::config::Config;
use crate::diagnostic::{Diagnostic, Source};

/// Parses a source with the front end its path names: `.toml` files with the
/// TOML front end, everything else as `.et`.
pub fn parse(source: &Source) -> Result<Config, Vec<Diagnostic>> {
    if source.is_toml() {
        toml::parse(&source.text)
    } else {
        et::parse(&source.text)
    }
}
