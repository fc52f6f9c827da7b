//! etemenanki-compiler: the `.et` and TOML front ends, lowering, validation
//! and diagnostics behind the `etc` binary.
//!
//! ```text
//! source -> syntax::parse -> Config -> lower -> Spec -> validate -> plan.bin
//! ```

pub mod cli;
pub mod codes;
pub mod config;
pub mod diagnostic;
pub mod lower;
pub mod plan_view;
pub mod render;
pub mod secrets;
pub mod syntax;
pub mod validate;

use std::path::Path;

use etemenanki_ir::spec::Spec;

pub use diagnostic::{Diagnostic, Severity, Source};

/// The compiler's version, written into every plan.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A configuration that compiled: its spec and the warnings found.
#[derive(Debug)]
pub struct Compiled {
    pub spec: Spec,
    pub warnings: Vec<Diagnostic>,
}

impl Compiled {
    /// The plan.bin bytes of this spec, compiled from `source`.
    pub fn plan_bytes(&self, source: &Source) -> Vec<u8> {
        etemenanki_ir::encode::encode(&self.spec, source.text.as_bytes(), VERSION)
    }
}

/// Why a file did not compile.
#[derive(Debug)]
pub enum Failure {
    /// The file could not be read.
    Io(String),
    /// The file was read and has errors; the list holds warnings too.
    Invalid(Source, Vec<Diagnostic>),
}

/// Compiles a source: parse, lower, validate. Errors come back with every
/// warning found, in source order.
pub fn compile(source: &Source) -> Result<Compiled, Vec<Diagnostic>> {
    let config = syntax::parse(source)?;
    let lower::Lowered {
        spec,
        origins,
        mut diags,
    } = lower::lower(&config, source);
    diags.extend(validate::validate(&config, &spec, &origins));
    diags.sort_by_key(|d| (d.span.start, d.severity));
    if diags.iter().any(Diagnostic::is_error) {
        Err(diags)
    } else {
        Ok(Compiled {
            spec,
            warnings: diags,
        })
    }
}

/// The largest configuration read: ten times the largest seen in practice.
const CONFIG_LIMIT: u64 = 64 << 20;

/// Reads and compiles a file: a regular file only, up to a bound.
pub fn compile_file(path: &Path) -> Result<(Source, Compiled), Failure> {
    let bytes = etemenanki_ir::file::read_regular(path, CONFIG_LIMIT).map_err(|e| {
        Failure::Io(format!(
            "cannot read {}: {}",
            path.display(),
            lower::io_text(&e)
        ))
    })?;
    compile_bytes(path.display().to_string(), bytes)
}

/// Compiles the bytes of a file named `path`. Bytes that are not UTF-8 are
/// an error at the first that is not, on the text with it replaced.
pub fn compile_bytes(path: String, bytes: Vec<u8>) -> Result<(Source, Compiled), Failure> {
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let source = Source::new(path, String::from_utf8_lossy(e.as_bytes()).into_owned());
            let diag = Diagnostic::error(
                codes::SYNTAX,
                at..at + char::REPLACEMENT_CHARACTER.len_utf8(),
                "the file is not valid UTF-8",
            )
            .with_label("this byte is not UTF-8")
            .with_help("configurations are UTF-8 text: convert the file, or remove the byte");
            return Err(Failure::Invalid(source, vec![diag]));
        }
    };
    let source = Source::new(path, text);
    match compile(&source) {
        Ok(compiled) => Ok((source, compiled)),
        Err(diags) => Err(Failure::Invalid(source, diags)),
    }
}
