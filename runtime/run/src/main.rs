//! etemenanki-run: executes a compiled plan.bin.
//!
//! It parses no configuration language, fills in no default and makes no
//! policy decision of its own: it serves the frozen plan.

mod apply;
mod balancer;
mod connect;
mod dial;
mod drain;
mod fanout;
mod id;
mod inbound;
mod outbound;
mod plan_file;
mod plane;
mod relay;
mod resolve;
mod route;

use std::path::PathBuf;
use std::process::ExitCode;

use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: etemenanki-run PLAN [--state FILE]";

struct Args {
    plan: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut plan = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-h" | "--help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Some("--state") => {
                args.next().ok_or("--state needs a file")?;
            }
            Some(flag) if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            _ if plan.is_none() => plan = Some(PathBuf::from(arg)),
            _ => return Err("more than one plan given".to_owned()),
        }
    }
    Ok(Args {
        plan: plan.ok_or("no plan given")?,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("etemenanki-run: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .init();
    let plan = match plan_file::load(&args.plan) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("etemenanki-run: {e}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("etemenanki-run: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(args, plan))
}

async fn serve(args: Args, plan: etemenanki_ir::encode::Plan) -> ExitCode {
    let mut terminate = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    let running = match apply::Runtime::start(plan.spec) {
        Ok(running) => running,
        Err(e) => {
            eprintln!("etemenanki-run: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(
        "serving {} (compiled by etc {})",
        args.plan.display(),
        plan.compiler_version
    );
    let signal = tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    tracing::info!("{signal}: shutting down");
    drop(running);
    ExitCode::SUCCESS
}
