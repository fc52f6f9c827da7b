//! Memory per idle proxied connection: the proxy's VmRSS (and PSS) before
//! and after opening that many SOCKS5 connections to a server that never
//! says a word, divided by their number; and likewise per idle SOCKS5 UDP
//! association, each after one round trip.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::udp::Association;
use crate::procfs;
use crate::servers::Servers;
use crate::socks5::client;

/// Connections opened and closed first, so one-time allocations (thread
/// pools, buffers) are not charged to the idle connections.
const WARM_UP: usize = 20;
/// How long to wait for the idle server to see every connection open or
/// closed.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);
/// A pause before reading memory, for the proxy to finish its own work.
const QUIET: Duration = Duration::from_millis(500);

/// The proxy's memory, VmRSS and PSS in KiB, at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub rss: u64,
    pub pss: u64,
}

impl Memory {
    fn read(pid: u32) -> io::Result<Memory> {
        Ok(Memory {
            rss: procfs::rss_kib(pid)?,
            pss: procfs::pss_kib(pid)?,
        })
    }
}

/// Memory of one proxy before and after the idle connections opened.
pub struct Idle {
    pub connections: usize,
    pub before: Memory,
    pub after: Memory,
}

impl Idle {
    /// VmRSS growth per connection, KiB.
    pub fn rss_per_connection(&self) -> f64 {
        (self.after.rss as f64 - self.before.rss as f64) / self.connections as f64
    }

    /// PSS growth per connection, KiB.
    pub fn pss_per_connection(&self) -> f64 {
        (self.after.pss as f64 - self.before.pss as f64) / self.connections as f64
    }
}

fn read_all(pids: &[u32]) -> io::Result<Vec<Memory>> {
    pids.iter().map(|&pid| Memory::read(pid)).collect()
}

fn open_many(
    proxy: SocketAddr,
    target: SocketAddr,
    n: usize,
    nudge: bool,
) -> io::Result<Vec<TcpStream>> {
    (0..n)
        .map(|i| {
            client::connect(proxy, target)
                .and_then(|mut stream| {
                    if nudge {
                        stream.write_all(b"*")?;
                    }
                    Ok(stream)
                })
                .map_err(|e| io::Error::new(e.kind(), format!("idle connection {i}: {e}")))
        })
        .collect()
}

fn wait_for_open(servers: &Servers, want: usize) -> io::Result<()> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while servers.idle_open() != want {
        if Instant::now() >= deadline {
            return Err(io::Error::other(format!(
                "idle server holds {} connections, expected {want}",
                servers.idle_open()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Opens `n` idle connections through `proxy` and reads the memory of
/// every process in `pids` (the proxy, and for a chain the server behind
/// it) before and after; one [`Idle`] per pid, in order. With `nudge`,
/// each connection sends one byte once open: a shadowsocks client may send
/// its request header only with the first payload, and until then the
/// server behind it has not dialed the idle server. `target` is where the
/// client asks for the idle server (`servers.idle` unless a tunnel maps it).
pub fn run(
    proxy: SocketAddr,
    pids: &[u32],
    servers: &Servers,
    target: SocketAddr,
    n: usize,
    nudge: bool,
) -> io::Result<Vec<Idle>> {
    measure(
        pids,
        n,
        |count| open_many(proxy, target, count, nudge),
        |count| wait_for_open(servers, count),
    )
}

/// The memory of every process in `pids` before and after `n` things that
/// `open` opens are held, once `open` has opened and dropped a warm-up's
/// worth; `settle(count)` waits until `count` are seen open.
fn measure<T>(
    pids: &[u32],
    n: usize,
    open: impl Fn(usize) -> io::Result<Vec<T>>,
    settle: impl Fn(usize) -> io::Result<()>,
) -> io::Result<Vec<Idle>> {
    drop(open(WARM_UP)?);
    settle(0)?;
    std::thread::sleep(QUIET);
    let before = read_all(pids)?;
    let held = open(n)?;
    settle(n)?;
    std::thread::sleep(QUIET);
    let after = read_all(pids)?;
    drop(held);
    settle(0)?;
    Ok(before
        .into_iter()
        .zip(after)
        .map(|(before, after)| Idle {
            connections: n,
            before,
            after,
        })
        .collect())
}

fn associate_many(proxy: SocketAddr, echo: SocketAddr, n: usize) -> io::Result<Vec<Association>> {
    (0..n)
        .map(|i| {
            Association::open(proxy, echo)
                .map_err(|e| io::Error::new(e.kind(), format!("idle association {i}: {e}")))
        })
        .collect()
}

/// Opens `n` SOCKS5 UDP associations through `proxy`, each after one round
/// trip to the UDP echo server, and reads the memory of every process in
/// `pids` before and after, as [`run`] does for connections.
pub fn run_udp(
    proxy: SocketAddr,
    pids: &[u32],
    echo: SocketAddr,
    n: usize,
) -> io::Result<Vec<Idle>> {
    // An association is open once its round trip is done.
    measure(
        pids,
        n,
        |count| associate_many(proxy, echo, count),
        |_| Ok(()),
    )
}
