//! `etc run CONFIG`: compile a configuration and start the runtime on it,
//! for development and the README. The plan is written next to the config's
//! name under the system's temporary directory, mode 0600 and through a
//! fresh temporary file (the directory is shared: see
//! `etemenanki_ir::file::write_private`), and the runtime replaces this
//! process.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use super::{compile_or_report, USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration (.et or .toml).
    file: PathBuf,
    /// Arguments passed on to etemenanki-run.
    #[arg(last = true)]
    runtime_args: Vec<String>,
}

pub fn run(args: Args) -> ExitCode {
    let (source, compiled) = match compile_or_report(&args.file) {
        Ok(done) => done,
        Err(code) => return code,
    };
    let stem = args
        .file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let plan = std::env::temp_dir().join(format!("etemenanki-{stem}-{}.bin", std::process::id()));
    if let Err(err) = etemenanki_ir::file::write_private(&plan, &compiled.plan_bytes(&source)) {
        errln!("error: cannot write {}: {err}", plan.display());
        return ExitCode::from(USAGE);
    }
    let runtime = runtime_binary();
    let err = Command::new(&runtime)
        .arg(&plan)
        .args(&args.runtime_args)
        .exec();
    errln!("error: cannot start {}: {err}", runtime.display());
    ExitCode::from(USAGE)
}

/// `etemenanki-run` beside this `etc` (as cargo builds them), else from PATH.
fn runtime_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("etemenanki-run")))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("etemenanki-run"))
}
