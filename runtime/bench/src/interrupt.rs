//! SIGINT and SIGTERM end the bench without unwinding, so the proxies'
//! `Drop` would not run: a thread waits for either signal, kills every
//! proxy still running, and exits.

use std::io;

use tokio::signal::unix::{signal, SignalKind};

use crate::proxy;

/// Exit status for a run ended by a signal (128 + SIGINT).
const INTERRUPTED: i32 = 130;

pub fn install() -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (mut interrupt, mut terminate) = runtime.block_on(async {
        io::Result::Ok((
            signal(SignalKind::interrupt())?,
            signal(SignalKind::terminate())?,
        ))
    })?;
    std::thread::Builder::new()
        .name("bench-signals".to_owned())
        .spawn(move || {
            let name = runtime.block_on(async {
                tokio::select! {
                    _ = interrupt.recv() => "SIGINT",
                    _ = terminate.recv() => "SIGTERM",
                }
            });
            eprintln!("etemenanki-bench: {name}: stopping every proxy");
            proxy::kill_all();
            std::process::exit(INTERRUPTED);
        })?;
    Ok(())
}
