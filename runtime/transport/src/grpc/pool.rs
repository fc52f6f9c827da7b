//! The HTTP/2 connections one outbound's gRPC streams share.
//!
//! A flow takes a stream on the oldest connection with room; a connection
//! has room while it carries fewer than [`MAX_STREAMS`] flows and fewer than
//! the server allows. When every connection is full, one new connection is
//! opened, and flows that arrive while it opens wait for it rather than
//! each opening its own. A connection found dead (its I/O ended, or the
//! server sent GOAWAY) is dropped from the pool and the dial that found it
//! opens one replacement, once: a failing server fails the dial, and the
//! flows that waited on that attempt, with its error.
//!
//! The pool holds one handle per connection. A connection closes when the
//! pool has let go of it and its last stream has ended; the pool keeps at
//! most one connection that carries no flow, so a burst leaves no trail of
//! idle connections behind it.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;

use super::driver::Driver;
use super::wire::{self, Tail, Wire};
use super::{h2_error, Addrs, CONNECTION_WINDOW, SEND_BUFFER, STREAM_WINDOW};
use crate::Stream;

/// Flows per connection: the number of concurrent streams RFC 9113
/// (section 6.5.2) asks a server to allow at least, so every server takes
/// it, and few enough that one lost segment stalls few flows. Xray's and
/// sing-box's gun clients put every stream on one connection.
pub(super) const MAX_STREAMS: usize = 100;

/// One HTTP/2 connection of the pool.
#[derive(Debug)]
struct Connection {
    send: SendRequest<Bytes>,
    addrs: Addrs,
    /// The flows that hold a stream on it.
    flows: AtomicUsize,
    driver: Arc<Driver>,
}

impl Connection {
    fn has_room(&self) -> bool {
        let limit = MAX_STREAMS.min(self.send.current_max_send_streams());
        self.flows.load(Ordering::Relaxed) < limit
    }

    fn is_closed(&self) -> bool {
        self.driver.is_ended()
    }
}

/// A flow's place on a connection, given back when the flow's stream is
/// dropped.
#[derive(Debug)]
pub(crate) struct Lease(Arc<Connection>);

impl Lease {
    fn take(connection: &Arc<Connection>) -> Self {
        connection.flows.fetch_add(1, Ordering::Relaxed);
        Lease(connection.clone())
    }

    pub(super) fn addrs(&self) -> Addrs {
        self.0.addrs
    }

    /// The I/O of the flow's connection, for the flow to run right after
    /// it gave h2 something to send.
    pub(super) fn driver(&self) -> &Driver {
        &self.0.driver
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.0.flows.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The last attempt to open a connection that failed, for the flows that
/// waited on it.
#[derive(Debug)]
struct Failure {
    at: Instant,
    kind: io::ErrorKind,
    text: String,
}

#[derive(Debug, Default)]
pub(crate) struct Pool {
    /// The connections, oldest first.
    connections: Mutex<Vec<Arc<Connection>>>,
    /// Held while a connection is opened.
    opening: tokio::sync::Mutex<Option<Failure>>,
}

impl Pool {
    /// A stream's place on a connection that is alive and has room, and a
    /// handle to open the stream with; opens the connection `dial` returns
    /// when there is none.
    pub(super) async fn lease<F, Fut>(&self, dial: F) -> io::Result<(Lease, SendRequest<Bytes>)>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = io::Result<Handshake>>,
    {
        if let Some(found) = self.live() {
            return Ok(found);
        }
        let asked = Instant::now();
        let mut opening = self.opening.lock().await;
        // Opened while this flow waited.
        if let Some(found) = self.live() {
            return Ok(found);
        }
        if let Some(failure) = opening.as_ref().filter(|f| f.at >= asked) {
            return Err(io::Error::new(failure.kind, failure.text.clone()));
        }
        match self.connect(dial).await {
            Ok(connection) => {
                *opening = None;
                let lease = Lease::take(&connection);
                let send = connection.send.clone();
                self.locked().push(connection);
                Ok((lease, send))
            }
            Err(e) => {
                *opening = Some(Failure {
                    at: Instant::now(),
                    kind: e.kind(),
                    text: e.to_string(),
                });
                Err(e)
            }
        }
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Connection>>> {
        // A panic elsewhere while the lock was held left the list whole:
        // every change to it is one call.
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place on the oldest live connection with room. Drops the dead
    /// connections, those that refuse new streams, and every idle
    /// connection but one.
    fn live(&self) -> Option<(Lease, SendRequest<Bytes>)> {
        let mut connections = self.locked();
        let mut idle_kept = false;
        let mut found = None;
        connections.retain(|connection| {
            if connection.is_closed() {
                return false;
            }
            if found.is_none() && connection.has_room() {
                let mut send = connection.send.clone();
                // A fresh handle is ready at once unless the connection
                // failed or the server sent GOAWAY.
                let waker = std::task::Waker::noop();
                match send.poll_ready(&mut std::task::Context::from_waker(waker)) {
                    std::task::Poll::Ready(Ok(())) => {
                        found = Some((Lease::take(connection), send));
                        return true;
                    }
                    std::task::Poll::Ready(Err(e)) => {
                        tracing::debug!("grpc connection dropped from the pool: {e}");
                        return false;
                    }
                    std::task::Poll::Pending => {}
                }
            }
            if connection.flows.load(Ordering::Relaxed) == 0 {
                if idle_kept {
                    return false;
                }
                idle_kept = true;
            }
            true
        });
        found
    }

    /// Opens one HTTP/2 connection and spawns its task.
    async fn connect<F, Fut>(&self, dial: F) -> io::Result<Arc<Connection>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = io::Result<Handshake>>,
    {
        let Handshake {
            send,
            connection,
            tail,
            addrs,
        } = dial().await?;
        let driver = Driver::new(connection, tail);
        tokio::spawn(driver.clone().run());
        Ok(Arc::new(Connection {
            send,
            addrs,
            flows: AtomicUsize::new(0),
            driver,
        }))
    }
}

/// An HTTP/2 connection that has done its handshake, its I/O not yet
/// running.
pub struct Handshake {
    send: SendRequest<Bytes>,
    connection: h2::client::Connection<Wire, Bytes>,
    tail: Tail,
    addrs: Addrs,
}

/// The HTTP/2 handshake over a connection to the server (TCP or TLS).
pub async fn handshake(stream: Stream) -> io::Result<Handshake> {
    let addrs = Addrs {
        local: stream.local_addr()?,
        peer: stream.peer_addr()?,
    };
    let (wire, tail) = wire::wire(stream);
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .enable_push(false)
        .max_send_buffer_size(SEND_BUFFER)
        // A flow that ends before the server's side does resets its
        // stream, and the server's frames already under way for it then
        // arrive on a stream h2 has forgotten once more than this many are
        // remembered (its default is 10), each answered with a reset of
        // h2's own.
        .max_concurrent_reset_streams(MAX_STREAMS)
        // h2 gives up the whole connection after 1,024 resets of its own
        // (ENHANCE_YOUR_CALM), a guard for servers against abusive
        // clients: on a connection shared by thousands of short flows, it
        // would close every flow on it at a time of h2's choosing.
        .max_local_error_reset_streams(None)
        .handshake::<_, Bytes>(wire)
        .await
        .map_err(h2_error)?;
    Ok(Handshake {
        send,
        connection,
        tail,
        addrs,
    })
}
