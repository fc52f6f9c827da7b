//! `etc plan --from OLD NEW`: preview what a reload builds, reuses and drains.
//!
//! OLD is the runtime's state file, a plan.bin or a source configuration (a
//! plan or configuration counts as deployed once: every resource at v1, epoch
//! 0); NEW is a source configuration or a plan.bin. Each file's kind is told
//! by its magic bytes, not its name. Exit codes follow `terraform plan`: 1 on
//! error; with `--detailed-exitcode`, 0 when nothing changes and 2 when
//! something does. See docs/plan.md.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use etemenanki_ir::file::{read_regular, PLAN_LIMIT};
use etemenanki_ir::spec::Spec;
use etemenanki_ir::state::DeployedState;
use etemenanki_ir::{encode, plan, state};

use super::{report_failure, Format, INVALID, USAGE};
use crate::render;
use crate::{plan_view, Failure};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What is deployed: a state file, a plan.bin or a source configuration.
    #[arg(long, value_name = "OLD")]
    pub from: PathBuf,
    /// What to load: a source configuration or a plan.bin.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// List reused resources one by one instead of counting them.
    #[arg(long)]
    pub verbose: bool,
    /// Exit 0 when nothing changes, 2 when something does, 1 on any error.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// The exit code when there are changes, under `--detailed-exitcode`.
const CHANGES: u8 = 2;

pub fn run(args: Args) -> ExitCode {
    let loaded = load_deployed(&args.from).and_then(|old| Ok((old, load_new(&args.new)?)));
    let (old, new) = match loaded {
        Ok(both) => both,
        Err(error) => {
            let code = error.report(args.format);
            // Under --detailed-exitcode 2 means "changes", so every error is 1.
            return ExitCode::from(if args.detailed_exitcode {
                INVALID
            } else {
                code
            });
        }
    };
    let plan = plan::plan(&old, &new);
    match args.format {
        Format::Human => out!("{}", plan_view::human(&plan, args.verbose)),
        Format::Json => outln!("{}", plan_view::json(&plan)),
    }
    match args.detailed_exitcode && plan.has_changes() {
        true => ExitCode::from(CHANGES),
        false => ExitCode::SUCCESS,
    }
}

/// Why an input could not be loaded.
enum LoadError {
    /// A source that does not read or compile.
    Compile(Failure),
    /// A binary file that does not decode, or one of the wrong kind.
    File(String),
}

impl LoadError {
    /// Prints the error on stderr (compile diagnostics as JSON on stdout under
    /// `--format json`, as `etc check` does) and returns its exit code.
    fn report(&self, format: Format) -> u8 {
        match self {
            // No source snippets: a line next to an error may hold a secret.
            LoadError::Compile(Failure::Invalid(source, diags)) if format == Format::Human => {
                err!("{}", render::compact(source, diags));
                errln!("{}", render::summary(&source.path, diags));
                INVALID
            }
            LoadError::Compile(failure) => {
                let _ = report_failure(failure, format);
                match failure {
                    Failure::Io(_) => USAGE,
                    Failure::Invalid(..) => INVALID,
                }
            }
            LoadError::File(message) => {
                errln!("error: {message}");
                USAGE
            }
        }
    }
}

/// A file `etc plan` reads, told apart by its first bytes.
enum Input {
    State(DeployedState),
    Spec(Spec),
}

fn load_deployed(path: &Path) -> Result<DeployedState, LoadError> {
    Ok(match load(path)? {
        Input::State(state) => state,
        Input::Spec(spec) => DeployedState::initial(spec),
    })
}

fn load_new(path: &Path) -> Result<Spec, LoadError> {
    match load(path)? {
        Input::Spec(spec) => Ok(spec),
        Input::State(_) => Err(LoadError::File(format!(
            "{} is a state file: NEW must be a configuration or a plan.bin",
            path.display()
        ))),
    }
}

/// Reads a state file, a plan.bin or a source configuration. A file
/// shorter than a magic but the start of one is a truncated file of that
/// kind, not a configuration.
fn load(path: &Path) -> Result<Input, LoadError> {
    let bytes = read_regular(path, PLAN_LIMIT).map_err(|e| {
        let message = format!(
            "cannot read {}: {}",
            path.display(),
            crate::lower::io_text(&e)
        );
        LoadError::Compile(Failure::Io(message))
    })?;
    let failed = |e: &dyn std::fmt::Display| LoadError::File(format!("{}: {e}", path.display()));
    let starts =
        |magic: &[u8]| bytes.starts_with(magic) || (!bytes.is_empty() && magic.starts_with(&bytes));
    match (starts(state::MAGIC), starts(encode::MAGIC)) {
        (true, true) => Err(failed(&format_args!(
            "truncated plan or state file: {} bytes, shorter than the {}-byte magic",
            bytes.len(),
            encode::MAGIC.len()
        ))),
        (true, false) => DeployedState::decode(&bytes)
            .map(Input::State)
            .map_err(|e| failed(&e)),
        (false, true) => encode::decode(&bytes)
            .map(|p| Input::Spec(p.spec))
            .map_err(|e| failed(&e)),
        (false, false) => crate::compile_bytes(path.display().to_string(), bytes)
            .map(|(_, compiled)| Input::Spec(compiled.spec))
            .map_err(LoadError::Compile),
    }
}
