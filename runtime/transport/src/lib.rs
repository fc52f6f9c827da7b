//! etemenanki-transport: what the proxy protocols run over.
//!
//! - [`dial`] and [`resolve`]: sockets under the plan's socket policy, and
//!   the resolvers of its DNS spec;
//! - [`Connector`]: built once per apply from an upstream's transport spec,
//!   it resolves the proxy server, connects, sets keepalive and layers TLS;
//! - [`Acceptor`] and [`listen`]: the server side, the listening socket and
//!   the TLS, WebSocket and HTTP/2 handshakes under their time limit,
//!   yielding [`Accepted`] streams;
//! - [`ws`]: the WebSocket upgrade (both sides) and its messages as a byte
//!   stream;
//! - [`grpc`]: a gun tunnel on one HTTP/2 stream as a byte stream, and the
//!   server's connection that yields one per call;
//! - [`buffers`]: the spare buffers a stream takes while its bytes move;
//! - [`Stream`]: the one stream type both sides hand the protocols, and
//!   [`Prefixed`] for bytes read ahead of it.
//!
//! A crate of its own so that OpenSSL (and later WebSocket, gRPC and QUIC)
//! does not recompile with every change to the runtime.

mod acceptor;
pub mod buffers;
mod connector;
pub mod dial;
pub mod grpc;
mod keepalive;
mod prefixed;
pub mod resolve;
mod stream;
pub mod tls;
pub mod ws;

pub use acceptor::{listen, Accepted, Acceptor};
pub use connector::Connector;
pub use prefixed::Prefixed;
pub use stream::Stream;

/// Gives the worker back to the rest of the runtime, as tokio's own
/// budget does: the task is woken once this worker has polled its I/O
/// driver. Waking its own waker instead would also wake an idle worker
/// to offer it the task, a cross-thread wake per yield.
pub fn yield_task<T>(cx: &mut std::task::Context<'_>) -> std::task::Poll<T> {
    use std::future::Future;
    let _ = std::pin::pin!(tokio::task::yield_now()).poll(cx);
    std::task::Poll::Pending
}
