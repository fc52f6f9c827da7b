//! Bulk TCP throughput: one connection writes to the sink until the byte
//! budget or the time budget is spent, and stops its clock when the sink
//! acknowledges the last byte.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{open, Limits};
use crate::procfs;
use crate::servers::ACK_EVERY;
use crate::socks5::client::IO_TIMEOUT;

/// The write size: large enough that system calls do not dominate; a
/// divisor of the sink's acknowledgement step.
const CHUNK: usize = 256 * 1024;

pub struct Bulk {
    pub bytes: u64,
    pub elapsed: Duration,
    /// CPU seconds each proxy spent (in the order of the pids given: a
    /// chain's front, then its server); empty for direct.
    pub proxy_cpu: Vec<f64>,
}

impl Bulk {
    /// Megabytes (10^6 bytes) per second.
    pub fn mb_per_second(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.elapsed.as_secs_f64()
    }

    /// Each proxy's CPU seconds per GiB moved.
    pub fn cpu_per_gib(&self) -> Vec<f64> {
        let gib = self.bytes as f64 / (1u64 << 30) as f64;
        self.proxy_cpu.iter().map(|cpu| cpu / gib).collect()
    }
}

/// Reads the sink's acknowledgements on a thread of their own, so they
/// never back up behind the writer.
fn read_acks(mut stream: TcpStream, acks: mpsc::Sender<u64>) {
    let mut ack = [0u8; 8];
    while stream.read_exact(&mut ack).is_ok() {
        if acks.send(u64::from_be_bytes(ack)).is_err() {
            return;
        }
    }
}

pub fn run(
    via: Option<SocketAddr>,
    sink: SocketAddr,
    proxy_pids: &[u32],
    ticks: u64,
    limits: &Limits,
) -> io::Result<Bulk> {
    let cpu = || -> io::Result<Vec<procfs::CpuSample>> {
        proxy_pids
            .iter()
            .map(|&pid| procfs::cpu_sample(pid))
            .collect()
    };
    let budget = (limits.bulk_bytes / ACK_EVERY).max(1) * ACK_EVERY;
    let mut stream = open(via, sink)?;
    let (sender, acks) = mpsc::channel();
    let reader = stream.try_clone()?;
    let acker = std::thread::spawn(move || read_acks(reader, sender));
    let chunk = vec![0x5au8; CHUNK];
    let cpu_before = cpu()?;
    let start = Instant::now();
    let mut sent: u64 = 0;
    // Whole acknowledgement steps, so the last byte is acknowledged.
    while sent < budget && start.elapsed() < limits.bulk_time {
        for _ in 0..ACK_EVERY / CHUNK as u64 {
            stream.write_all(&chunk)?;
        }
        sent += ACK_EVERY;
    }
    let acked = loop {
        match acks.recv_timeout(IO_TIMEOUT) {
            Ok(acked) if acked >= sent => break Ok(acked),
            Ok(_) => continue,
            Err(_) => {
                break Err(io::Error::other(format!(
                    "sink acknowledged fewer than the {sent} bytes sent"
                )))
            }
        }
    };
    let elapsed = start.elapsed();
    let cpu_after = cpu()?;
    let _ = stream.shutdown(Shutdown::Both);
    let _ = acker.join();
    if acked? != sent {
        return Err(io::Error::other(
            "sink acknowledged more bytes than were sent",
        ));
    }
    Ok(Bulk {
        bytes: sent,
        elapsed,
        proxy_cpu: cpu_before
            .iter()
            .zip(&cpu_after)
            .map(|(b, a)| a.seconds_since(b, ticks))
            .collect(),
    })
}
