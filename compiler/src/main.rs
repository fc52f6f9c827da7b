//! `etc`, the Etemenanki compiler.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use etemenanki_compiler::cli;

#[derive(Debug, Parser)]
#[command(
    name = "etc",
    version,
    about = "Compile, check and preview Etemenanki configurations"
)]
struct Etc {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check configurations and report every problem (exit 0 valid, 1 invalid, 2 usage or I/O error).
    Check(cli::check::Args),
    /// Compile a configuration into a plan file.
    Build(cli::build::Args),
    /// Show what a plan file holds, secrets masked.
    Inspect(cli::inspect::Args),
    /// Preview what loading a configuration on a running host builds, reuses and drains.
    Plan(cli::plan::Args),
    /// Show which rule and which outbound a flow would take.
    Route(cli::route::Args),
    /// Explain a diagnostic code.
    Explain(cli::explain::Args),
    /// Compile a configuration and start etemenanki-run on it (for development).
    Run(cli::run::Args),
}

fn main() -> ExitCode {
    match Etc::parse().command {
        Command::Check(args) => cli::check::run(args),
        Command::Build(args) => cli::build::run(args),
        Command::Inspect(args) => cli::inspect::run(args),
        Command::Plan(args) => cli::plan::run(args),
        Command::Route(args) => cli::route::run(args),
        Command::Explain(args) => cli::explain::run(args),
        Command::Run(args) => cli::run::run(args),
    }
}
