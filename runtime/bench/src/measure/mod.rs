//! The measurements. Each takes the proxy to go through (`None`: direct)
//! and bounds its loop both by a count and by a time.

pub mod bulk;
pub mod connects;
pub mod idle;
pub mod reload;
pub mod udp;

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::socks5::client;

/// How much work each measurement does at most.
#[derive(Debug, Clone)]
pub struct Limits {
    pub bulk_bytes: u64,
    pub bulk_time: Duration,
    pub sequential_connects: u64,
    pub concurrent_connects: u64,
    pub concurrency: usize,
    pub connect_time: Duration,
    pub idle_connections: usize,
    pub udp_round_trips: u64,
    pub udp_time: Duration,
    pub reload_outbounds: usize,
}

/// A TCP stream to `target`, through the SOCKS5 proxy `via` if there is one.
pub fn open(via: Option<SocketAddr>, target: SocketAddr) -> io::Result<TcpStream> {
    match via {
        Some(proxy) => client::connect(proxy, target),
        None => client::dial(target),
    }
}

/// A count of operations over a time: a rate.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub count: u64,
    pub elapsed: Duration,
}

impl Rate {
    pub fn per_second(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64()
    }
}
