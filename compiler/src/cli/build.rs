//! `etc build FILE -o plan.bin`: compile and freeze a configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use etemenanki_ir::file::write_private;

use super::{compile_or_report, USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration (.et or .toml).
    file: PathBuf,
    /// Where to write the plan; it holds secrets, so it is created mode 0600
    /// and replaced atomically (a runtime watching the path never sees half
    /// a plan).
    #[arg(short, long, default_value = "plan.bin")]
    output: PathBuf,
}

pub fn run(args: Args) -> ExitCode {
    let (source, compiled) = match compile_or_report(&args.file) {
        Ok(done) => done,
        Err(code) => return code,
    };
    let bytes = compiled.plan_bytes(&source);
    match write_private(&args.output, &bytes) {
        Ok(()) => {
            errln!("wrote {} ({} bytes)", args.output.display(), bytes.len());
            ExitCode::SUCCESS
        }
        Err(err) => {
            errln!("error: cannot write {}: {err}", args.output.display());
            ExitCode::from(USAGE)
        }
    }
}
