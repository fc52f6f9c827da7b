//! `etc explain CODE`: the long explanation of a diagnostic code.

use std::process::ExitCode;

use super::USAGE;
use crate::codes;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A code such as E0201 or W0001.
    code: String,
}

pub fn run(args: Args) -> ExitCode {
    match codes::lookup(&args.code) {
        Some(code) => {
            outln!("{}: {}\n\n{}", code.code, code.title, code.explanation);
            ExitCode::SUCCESS
        }
        None => {
            errln!(
                "error: no diagnostic code {}; codes run from E0001 to W0005",
                args.code
            );
            ExitCode::from(USAGE)
        }
    }
}
