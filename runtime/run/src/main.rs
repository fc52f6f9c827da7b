//! etemenanki-run: executes a compiled plan.bin. A thin command line over
//! the `etemenanki_run` library: its arguments, its logs, the signals and
//! the plan file's watch; the library builds, serves and reloads.

use etemenanki_run::{apply, plan_file};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use etemenanki_ir::state::DeployedState;
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
    write_state(args.state.as_deref(), running.state());
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
            write_state(args.state.as_deref(), running.state());
        }
        Err(e) => tracing::error!("reload: build failed, keeping current config: {e}"),
    }
}

/// Writes the deployed state, which holds every secret of the plan: mode
/// 0600, through a fresh temporary file renamed over the old one, so a
/// reader never sees half a file and nothing planted beside it is followed.
fn write_state(path: Option<&Path>, state: &DeployedState) {
    let Some(path) = path else { return };
    if let Err(e) = etemenanki_ir::file::write_private(path, &state.encode()) {
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
    /// The digest of the plan file now; `None` when it cannot be read. Only
    /// a regular file is read, and its open never waits: a FIFO put at the
    /// path would otherwise block the control loop, SIGTERM included.
    fn of(path: &Path) -> FileStamp {
        FileStamp(
            plan_file::read(path)
                .ok()
                .map(|bytes| etemenanki_ir::encode::sha256(&bytes)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etemenanki_ir::route::RouteTable;
    use etemenanki_ir::spec::{
        DnsSpec, Limits, OutboundProtocol, OutboundSpec, SocketPolicy, Spec,
    };

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("run-main-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_state_file_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let spec = Spec {
            inbounds: vec![],
            outbounds: vec![OutboundSpec {
                tag: "block".into(),
                protocol: OutboundProtocol::Blackhole,
                drain: Default::default(),
            }],
            balancers: vec![],
            route: RouteTable::new(vec![], "block".into()).unwrap(),
            dns: DnsSpec::System,
            socket: SocketPolicy::default(),
            limits: Limits::default(),
        };
        let state = DeployedState::initial(spec);
        let path = dir("state").join("state");
        write_state(Some(&path), &state);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            DeployedState::decode(&std::fs::read(&path).unwrap()),
            Ok(state)
        );
    }

    #[test]
    fn a_fifo_at_the_plan_path_never_blocks_the_watch() {
        let fifo = dir("fifo").join("plan.bin");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo runs");
        let (done, stamp) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(FileStamp::of(&fifo));
        });
        let stamp = stamp
            .recv_timeout(Duration::from_secs(5))
            .expect("the watch reads a FIFO at once");
        assert!(stamp == FileStamp(None), "a FIFO has no stamp");
    }
}
