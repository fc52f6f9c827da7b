//! `etc build FILE -o plan.bin`: compile and freeze a configuration.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{compile_or_report, USAGE};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration (.et or .toml).
    file: PathBuf,
    /// Where to write the plan; it holds secrets, so it is created mode 0600.
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
            eprintln!("wrote {} ({} bytes)", args.output.display(), bytes.len());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: cannot write {}: {err}", args.output.display());
            ExitCode::from(USAGE)
        }
    }
}

/// Writes a file readable by its owner only, replacing it atomically (a
/// runtime watching the path never sees half a plan).
pub fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}
