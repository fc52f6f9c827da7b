//! The `etc` subcommands. Each module has a clap `Args` and a `run`.
//!
//! Exit codes: 0 success, 1 an invalid configuration (or, for `plan
//! --detailed-exitcode`, an error), 2 a usage or I/O error.
//!
//! Output goes through `outln!` and `errln!` (and `out!`, `err!`)
//! rather than `println!`, which panics when the reader is gone: `etc check
//! x | head` stops writing quietly, as other Unix tools do, and exits as it
//! would have.

/// `print!` that a closed stdout does not turn into a panic.
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::write(&mut std::io::stdout().lock(), format_args!($($arg)*)) };
}

/// `println!` that a closed stdout does not turn into a panic.
macro_rules! outln {
    ($($arg:tt)*) => { $crate::cli::out!("{}\n", format_args!($($arg)*)) };
}

/// `eprint!` that a closed stderr does not turn into a panic.
macro_rules! err {
    ($($arg:tt)*) => { $crate::cli::write(&mut std::io::stderr().lock(), format_args!($($arg)*)) };
}

/// `eprintln!` that a closed stderr does not turn into a panic.
macro_rules! errln {
    ($($arg:tt)*) => { $crate::cli::err!("{}\n", format_args!($($arg)*)) };
}

// For the `$crate::cli::` paths the line forms expand to.
pub(crate) use {err, out};

pub mod build;
pub mod check;
pub mod explain;
pub mod inspect;
pub mod plan;
pub mod route;
pub mod run;

use std::process::ExitCode;

use clap::ValueEnum;

use crate::render::{self, Style};
use crate::Failure;

/// Writes to an output stream. A broken pipe means the reader has gone, and
/// what is left is not written; any other error leaves no way to report, so
/// the command stops with the I/O exit code.
pub(crate) fn write(stream: &mut dyn std::io::Write, text: std::fmt::Arguments<'_>) {
    match stream.write_fmt(text) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(_) => std::process::exit(USAGE.into()),
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    #[default]
    Human,
    Json,
}

pub const INVALID: u8 = 1;
pub const USAGE: u8 = 2;

/// Compiles a file, printing its warnings on stderr; on failure, reports it
/// and gives the exit code to return.
pub fn compile_or_report(
    file: &std::path::Path,
) -> Result<(crate::Source, crate::Compiled), ExitCode> {
    let (source, compiled) =
        crate::compile_file(file).map_err(|failure| report_failure(&failure, Format::Human))?;
    if !compiled.warnings.is_empty() {
        err!(
            "{}",
            render::human(&source, &compiled.warnings, Style::detect())
        );
    }
    Ok((source, compiled))
}

/// Reports a failed compile on stderr and returns the exit code for it.
pub fn report_failure(failure: &Failure, format: Format) -> ExitCode {
    match failure {
        Failure::Io(message) => {
            errln!("error: {message}");
            ExitCode::from(USAGE)
        }
        Failure::Invalid(source, diags) => {
            match format {
                Format::Human => {
                    err!("{}", render::human(source, diags, Style::detect()));
                    errln!("{}", render::summary(&source.path, diags));
                }
                Format::Json => outln!("{}", render::json(&[(source, diags)])),
            }
            ExitCode::from(INVALID)
        }
    }
}
