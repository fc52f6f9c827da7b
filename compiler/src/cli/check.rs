//! `etc check FILE...`: report every problem of every file.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{Format, INVALID, USAGE};
use crate::render::{self, Style};
use crate::{compile_file, Diagnostic, Failure, Source};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Configuration files (.et or .toml).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Fail when there are warnings, too.
    #[arg(long)]
    deny_warnings: bool,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: Args) -> ExitCode {
    let mut checked: Vec<(Source, Vec<Diagnostic>)> = Vec::new();
    let mut unreadable = false;
    for path in &args.files {
        match compile_file(path) {
            Ok((source, compiled)) => checked.push((source, compiled.warnings)),
            Err(Failure::Invalid(source, diags)) => checked.push((source, diags)),
            Err(Failure::Io(message)) => {
                errln!("error: {message}");
                unreadable = true;
            }
        }
    }
    match args.format {
        Format::Human => {
            let style = Style::detect();
            for (source, diags) in &checked {
                err!("{}", render::human(source, diags, style));
                errln!("{}", render::summary(&source.path, diags));
            }
        }
        Format::Json => {
            let files: Vec<(&Source, &[Diagnostic])> =
                checked.iter().map(|(s, d)| (s, &d[..])).collect();
            outln!("{}", render::json(&files));
        }
    }
    let failed = checked
        .iter()
        .flat_map(|(_, d)| d)
        .any(|d| d.is_error() || args.deny_warnings);
    if unreadable {
        ExitCode::from(USAGE)
    } else if failed {
        ExitCode::from(INVALID)
    } else {
        ExitCode::SUCCESS
    }
}
