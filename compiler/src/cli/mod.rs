//! The `etc` subcommands. Each module has a clap `Args` and a `run`.
//!
//! Exit codes: 0 success, 1 an invalid configuration (or, for `plan
//! --detailed-exitcode`, an error), 2 a usage or I/O error.

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
        eprint!(
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
            eprintln!("error: {message}");
            ExitCode::from(USAGE)
        }
        Failure::Invalid(source, diags) => {
            match format {
                Format::Human => {
                    eprint!("{}", render::human(source, diags, Style::detect()));
                    eprintln!("{}", render::summary(&source.path, diags));
                }
                Format::Json => println!("{}", render::json(&[(source, diags)])),
            }
            ExitCode::from(INVALID)
        }
    }
}
