//! etemenanki-run: executes a compiled plan.bin.
//!
//! It parses no configuration language, fills in no default and makes no
//! policy decision of its own: it serves the frozen plan.

mod apply;
mod balancer;
mod buffers;
mod connect;
mod drain;
mod fanout;
mod framed;
mod id;
mod inbound;
mod outbound;
mod own_inbounds;
mod plan_file;
mod plane;
mod relay;
mod route;

use etemenanki_transport::{dial, resolve};

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: etemenanki-run PLAN [--state FILE]";

/// How often the plan file is checked for a replacement.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);

struct Args {
    plan: PathBuf,
    /// Where the deployed state is written after each apply, for
    /// `etc plan --from STATE` to preview the next reload exactly.
    state: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut plan = None;
    let mut state = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("-h" | "--help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Some("--state") => {
                state = Some(PathBuf::from(args.next().ok_or("--state needs a file")?))
            }
            Some(flag) if flag.starts_with('-') => return Err(format!("unknown option {flag}")),
            _ if plan.is_none() => plan = Some(PathBuf::from(arg)),
            _ => return Err("more than one plan given".to_owned()),
        }
    }
    Ok(Args {
        plan: plan.ok_or("no plan given")?,
        state,
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
    let mut hangup = signal(SignalKind::hangup()).expect("installing a SIGHUP handler");
    let mut stamp = FileStamp::of(&args.plan);
    let mut running = match apply::Runtime::start(plan.spec) {
        Ok(running) => running,
        Err(e) => {
            eprintln!("etemenanki-run: {e}");
            return ExitCode::FAILURE;
        }
    };
    write_state(&args, &running);
    tracing::info!(
        "serving {} (compiled by etc {})",
        args.plan.display(),
        plan.compiler_version
    );
    let mut watch = tokio::time::interval(WATCH_INTERVAL);
    let signal = loop {
        tokio::select! {
            _ = terminate.recv() => break "SIGTERM",
            _ = interrupt.recv() => break "SIGINT",
            _ = hangup.recv() => {
                stamp = FileStamp::of(&args.plan);
                reload(&args, &mut running, "SIGHUP");
            }
            _ = watch.tick() => {
                let now = FileStamp::of(&args.plan);
                if now != stamp {
                    stamp = now;
                    reload(&args, &mut running, "the plan file changed");
                }
            }
        }
    };
    tracing::info!("{signal}: shutting down");
    drop(running);
    ExitCode::SUCCESS
}

/// Loads the plan file again and applies it; a plan that fails to load or
/// build leaves the running one in place.
fn reload(args: &Args, running: &mut apply::Runtime, why: &str) {
    tracing::info!("reload: {why}: loading {}", args.plan.display());
    let started = std::time::Instant::now();
    let applied = plan_file::load(&args.plan).and_then(|plan| running.reload(plan.spec));
    match applied {
        Ok(plan) => {
            let took = started.elapsed().as_secs_f64() * 1000.0;
            tracing::info!(
                "reload: applied epoch {} in {took:.1} ms: {}",
                plan.epoch,
                plan.summary()
            );
            write_state(args, running);
        }
        Err(e) => tracing::error!("reload: build failed, keeping current config: {e}"),
    }
}

/// Writes the deployed state beside its final name, then renames it, so a
/// reader never sees half a file.
fn write_state(args: &Args, running: &apply::Runtime) {
    let Some(path) = &args.state else { return };
    let partial = path.with_extension("partial");
    let written = std::fs::write(&partial, running.state().encode())
        .and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = written {
        tracing::error!("cannot write the state file {}: {e}", path.display());
    }
}

/// What tells a replaced plan file from the one loaded: the digest of its
/// bytes. Inode, length and modification time are not enough: a file
/// replaced twice within one timer tick can reuse the inode, the length and
/// the timestamp of the one before.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileStamp(Option<[u8; 32]>);

impl FileStamp {
    fn of(path: &Path) -> FileStamp {
        FileStamp(
            std::fs::read(path)
                .ok()
                .map(|bytes| etemenanki_ir::encode::sha256(&bytes)),
        )
    }
}
