//! Connection setup rate: open a connection (through SOCKS5 CONNECT when
//! there is a proxy), send one byte, read its echo, close. Sequentially,
//! and from a fixed number of concurrent workers.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{open, Rate};

/// One connection's whole life: setup, a one-byte round trip, close.
///
/// The close is an abort (SO_LINGER 0), and the echo server closes its end
/// first: thousands of connections a second ending in TIME_WAIT on the
/// client's ephemeral ports would use up the ports that a proxy binding its
/// outgoing sockets (dante) needs. Waiting for the server's close to be
/// relayed instead would time the proxy's close policy (v2ray holds a
/// half-closed connection for a second), not its connection setup.
fn one(via: Option<SocketAddr>, echo: SocketAddr) -> io::Result<()> {
    let mut stream = open(via, echo)?;
    stream.write_all(b"*")?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer)?;
    if answer != *b"*" {
        return Err(io::Error::other("echo server answered another byte"));
    }
    socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO))
}

/// Up to `max` connections one after another, for at most `time`.
pub fn sequential(
    via: Option<SocketAddr>,
    echo: SocketAddr,
    max: u64,
    time: Duration,
) -> io::Result<Rate> {
    let start = Instant::now();
    let mut count = 0;
    while count < max && start.elapsed() < time {
        one(via, echo).map_err(|e| io::Error::new(e.kind(), format!("connection {count}: {e}")))?;
        count += 1;
    }
    Ok(Rate {
        count,
        elapsed: start.elapsed(),
    })
}

/// Up to `max` connections shared among `workers` threads, each running
/// connections back to back, for at most `time`. The first failure stops
/// every worker and is the result.
pub fn concurrent(
    via: Option<SocketAddr>,
    echo: SocketAddr,
    workers: usize,
    max: u64,
    time: Duration,
) -> io::Result<Rate> {
    let taken = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    let start = Instant::now();
    let results: Vec<io::Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    while !failed.load(Ordering::Relaxed) && start.elapsed() < time {
                        let ticket = taken.fetch_add(1, Ordering::Relaxed);
                        if ticket >= max {
                            break;
                        }
                        if let Err(e) = one(via, echo) {
                            failed.store(true, Ordering::Relaxed);
                            return Err(io::Error::new(
                                e.kind(),
                                format!("connection {ticket}: {e}"),
                            ));
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("worker panicked")))
            })
            .collect()
    });
    let elapsed = start.elapsed();
    results.into_iter().collect::<io::Result<Vec<()>>>()?;
    Ok(Rate {
        count: done.load(Ordering::Relaxed),
        elapsed,
    })
}
