//! gRPC under a proxy client: gun framing, one `Hunk` per gRPC message, on one HTTP/2 stream
//! POSTed to `/<service_name>/Tun` with the authority of the spec and the
//! default user agent, over TCP or TLS (ALPN h2).
//!
//! The streams of one outbound share HTTP/2 connections ([`pool`]), each
//! with a task of its own that ends once the outbound has let go of the
//! connection and its last stream is dropped; a flow that sends runs the
//! connection's I/O itself when no one else is ([`driver`]). On either side, h2
//! writes through a [`wire`], which packs its frames into whole TLS
//! records.

mod driver;
mod pool;
mod server;
mod stream;
#[cfg(test)]
mod tests;
mod wire;

use std::future::Future;
use std::io;
use std::net::SocketAddr;

use http::{Method, Request, Uri};

pub use pool::{handshake, Handshake};
pub use server::{GrpcConnection, GrpcServer};
pub use stream::GrpcStream;

use crate::ws::DEFAULT_USER_AGENT;

/// The stream window we grant the server: a flow's read-ahead, in line
/// with the client runtime's buffers.
const STREAM_WINDOW: u32 = 256 * 1024;

/// The connection's receive window, shared by its streams: a few streams'
/// worth, on either side.
const CONNECTION_WINDOW: u32 = 4 * STREAM_WINDOW;

/// The most a stream's writes queue in h2 before a write waits for the
/// socket (h2's default is 400 KiB), on either side.
const SEND_BUFFER: usize = 128 * 1024;

/// How one outbound opens its gRPC streams, and the connections they share.
#[derive(Debug)]
pub struct GrpcSettings {
    uri: Uri,
    pool: pool::Pool,
}

impl GrpcSettings {
    /// `tls` picks the scheme of the request, as a gRPC client sends it.
    pub fn new(authority: &str, service_name: &str, tls: bool) -> io::Result<Self> {
        if authority.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "missing grpc authority",
            ));
        }
        let scheme = if tls { "https" } else { "http" };
        // A bare IPv6 address (the server's, defaulted) is bracketed in a URI.
        let authority = match authority.parse::<std::net::Ipv6Addr>() {
            Ok(v6) => format!("[{v6}]"),
            Err(_) => authority.to_owned(),
        };
        let uri = format!("{scheme}://{authority}/{service_name}/Tun")
            .parse()
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("grpc service name {service_name:?} or authority {authority:?} does not make a request path"),
                )
            })?;
        Ok(GrpcSettings {
            uri,
            pool: pool::Pool::default(),
        })
    }

    /// Opens the tunnel's stream on a connection of the pool, on the one
    /// `dial` opens (see [`handshake`]) when every connection is full or
    /// dead.
    /// The server's answer is read with the first read, so the first bytes
    /// need not wait a round trip.
    pub async fn open<F, Fut>(&self, dial: F) -> io::Result<GrpcStream>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = io::Result<Handshake>>,
    {
        let (lease, mut send) = self.pool.lease(dial).await?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("user-agent", DEFAULT_USER_AGENT)
            .body(())
            .map_err(io::Error::other)?;
        // The request's head goes out from this task, as a message does.
        let (response, body) = lease
            .driver()
            .send(|| send.send_request(request, false))
            .map_err(h2_error)?;
        Ok(GrpcStream::new(response, body, lease))
    }
}

/// The addresses of the TCP connection under the HTTP/2 one.
#[derive(Clone, Copy, Debug)]
pub struct Addrs {
    pub local: SocketAddr,
    pub peer: SocketAddr,
}

/// An h2 error as an io::Error with a text that says it was gRPC's.
pub(crate) fn h2_error(e: h2::Error) -> io::Error {
    h2_error_by(e, "server")
}

/// As [`h2_error`], blaming `peer` (the server or the client) for a reset
/// or a GOAWAY it sent; one of ours answers what it sent.
fn h2_error_by(e: h2::Error, peer: &str) -> io::Error {
    if let Some(reason) = e.reason() {
        let by = if e.is_remote() {
            format!("by the {peer}")
        } else {
            format!("on the {peer}'s error")
        };
        if e.is_reset() {
            return io::Error::new(
                io::ErrorKind::ConnectionReset,
                format!("grpc stream reset {by}: {reason}"),
            );
        }
        if e.is_go_away() {
            return io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("grpc connection closed {by}: {reason}"),
            );
        }
    }
    if e.is_io() {
        if let Some(io) = e.get_io() {
            return io::Error::new(io.kind(), format!("grpc connection: {io}"));
        }
    }
    io::Error::other(format!("grpc: {e}"))
}
