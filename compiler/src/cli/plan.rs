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

use etemenanki_ir::spec::Spec;
use etemenanki_ir::state::DeployedState;
use etemenanki_ir::{encode, plan, state};

use crate::plan_view;
use crate::render::{self, Style};
use crate::Source;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// What is deployed: a state file, a plan.bin or a source configuration.
    #[arg(long, value_name = "OLD")]
    pub from: PathBuf,
    /// What to load: a source configuration or a plan.bin.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// List reused resources one by one instead of counting them.
    #[arg(long)]
    pub verbose: bool,
    /// Exit 0 when nothing changes, 2 when something does, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Human,
    Json,
}

pub fn run(args: Args) -> ExitCode {
    let loaded = load_deployed(&args.from).and_then(|old| Ok((old, load_new(&args.new)?)));
    let (old, new) = match loaded {
        Ok(both) => both,
        Err(message) => {
            eprint!("{message}");
            return ExitCode::from(1);
        }
    };
    let plan = plan::plan(&old, &new);
    match args.format {
        Format::Human => print!("{}", plan_view::human(&plan, args.verbose)),
        Format::Json => println!("{}", plan_view::json(&plan)),
    }
    match args.detailed_exitcode && plan.has_changes() {
        true => ExitCode::from(2),
        false => ExitCode::SUCCESS,
    }
}

/// A file `etc plan` reads, told apart by its first bytes.
enum Input {
    State(DeployedState),
    Plan(Spec),
    Source(Spec),
}

fn load_deployed(path: &Path) -> Result<DeployedState, String> {
    Ok(match load(path)? {
        Input::State(state) => state,
        Input::Plan(spec) | Input::Source(spec) => DeployedState::initial(spec),
    })
}

fn load_new(path: &Path) -> Result<Spec, String> {
    match load(path)? {
        Input::Plan(spec) | Input::Source(spec) => Ok(spec),
        Input::State(_) => Err(format!(
            "error: {} is a state file: NEW must be a configuration or a plan.bin\n",
            path.display()
        )),
    }
}

/// Reads a state file, a plan.bin or a source. Errors come back as the text
/// to print, diagnostics rendered.
fn load(path: &Path) -> Result<Input, String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("error: cannot read {}: {}\n", path.display(), io_text(&e)))?;
    let failed = |e: &dyn std::fmt::Display| format!("error: {}: {e}\n", path.display());
    if bytes.starts_with(state::MAGIC) {
        return DeployedState::decode(&bytes).map(Input::State).map_err(|e| failed(&e));
    }
    if bytes.starts_with(encode::MAGIC) {
        return encode::decode(&bytes).map(|p| Input::Plan(p.spec)).map_err(|e| failed(&e));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        failed(&"not UTF-8 text, and not a plan.bin or state file either")
    })?;
    let source = Source::new(path.display().to_string(), text);
    match crate::compile(&source) {
        Ok(compiled) => Ok(Input::Source(compiled.spec)),
        Err(diags) => Err(format!(
            "{}{}\n",
            render::human(&source, &diags, Style::detect()),
            render::summary(&source.path, &diags)
        )),
    }
}

/// An I/O error's text without the `(os error N)` suffix.
fn io_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_lowercase(),
        None => text,
    }
}
