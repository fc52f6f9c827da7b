//! gRPC under an inbound, over the accepted TCP or TLS stream: the HTTP/2
//! server handshake,
//! then every call to `/<service_name>/Tun` one gun tunnel ([`GrpcStream`])
//! as v2ray, Xray and sing-box clients open them, many on one connection;
//! so is every call to `/<service_name>/TunMulti`, Xray's multi mode, whose
//! messages carry several buffers each
//! ([`etemenanki_proto::gun::Message::MultiHunk`]).
//!
//! A [`GrpcConnection`] owns the HTTP/2 connection and yields its calls.
//! h2 does all of a connection's I/O, for every stream on it, inside the
//! polls of that connection: the streams it yielded move no byte unless
//! [`GrpcConnection::next`] is being awaited. So the caller runs it in a
//! task of its own (the socket's task), spawns one task per stream it
//! yields, and keeps calling `next` until it returns `None` or an error;
//! dropping the connection ends every stream on it.
//!
//! A call the service does not serve is answered as grpc-go answers it
//! ([`refusal`]), and the connection goes on.
//!
//! Liveness: a ping every [`PING_INTERVAL`], and a client whose pong has
//! not come within the handshake time limit is dropped. A connection that
//! has carried no call by the handshake deadline, counted from its accept,
//! is closed then (GOAWAY), however many refused calls it made: those hold
//! its handshake slot no longer. One that carried a call is closed once it
//! has carried none for the relay idle time limit, so a client that keeps
//! its connection for later calls (as grpc-go's do) may.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use etemenanki_ir::spec::Limits;
use h2::server::{Connection, SendResponse};
use h2::{Ping, PingPong, Reason, RecvStream};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Request, Response};
use tokio::time::{Instant, Sleep};

use self::refusal::Refusal;
use super::stream::GrpcStream;
use super::wire::{self, Tail, Wire};
use super::{h2_error_by, Addrs, CONNECTION_WINDOW, SEND_BUFFER, STREAM_WINDOW};
use crate::Stream;

/// Between two pings on a connection.
const PING_INTERVAL: Duration = Duration::from_secs(60);

/// Calls open at once on one connection; a client waits for one to end
/// before it opens another. Each is a flow with a task of its own, so this
/// bounds what one socket can make the inbound run.
const MAX_CONCURRENT_STREAMS: u32 = 1024;

/// The largest request head: a call's is a few hundred bytes.
const MAX_HEADER_LIST: u32 = 64 * 1024;

const GRPC: &str = "application/grpc";

/// The trailers that end a call well.
pub(super) fn status_ok() -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    trailers
}

/// How one inbound takes its HTTP/2 connections.
#[derive(Clone, Debug)]
pub struct GrpcServer {
    /// The service whose `Tun` and `TunMulti` calls are tunnels.
    service: Arc<str>,
    ping_interval: Duration,
}

impl GrpcServer {
    pub fn new(service_name: &str) -> Self {
        GrpcServer {
            service: service_name.into(),
            ping_interval: PING_INTERVAL,
        }
    }

    /// The server handshake over `stream`: our SETTINGS sent, the client's
    /// preface read. The caller bounds the time it takes; `limits` gives
    /// the connection's liveness its time limits, and `deadline` (the
    /// handshake deadline counted from the socket's accept) is when it is
    /// closed if it has carried no call by then.
    pub async fn accept(
        &self,
        stream: Stream,
        limits: &Limits,
        deadline: Instant,
    ) -> io::Result<GrpcConnection> {
        let addrs = Addrs {
            local: stream.local_addr()?,
            peer: stream.peer_addr()?,
        };
        let (wire, tail) = wire::wire(stream);
        let mut handshake = pin!(h2::server::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(MAX_HEADER_LIST)
            .max_send_buffer_size(SEND_BUFFER)
            .handshake::<_, Bytes>(wire));
        // Our SETTINGS, gathered by the handshake, go out while it waits
        // for the client's preface: a client may wait for them first.
        let mut connection = poll_fn(|cx| match handshake.as_mut().poll(cx) {
            Poll::Ready(done) => Poll::Ready(done.map_err(client_error)),
            Poll::Pending => {
                ready!(tail.poll_flush(cx))?;
                Poll::Pending
            }
        })
        .await?;
        poll_fn(|cx| tail.poll_flush(cx)).await?;
        let now = Instant::now();
        Ok(GrpcConnection {
            ping: connection.ping_pong(),
            connection,
            tail,
            service: self.service.clone(),
            addrs,
            ping_interval: self.ping_interval,
            pong_timeout: limits.handshake_timeout,
            ping_timer: Box::pin(tokio::time::sleep_until(now + self.ping_interval)),
            pong_due: false,
            idle_limit: limits.relay_idle_timeout,
            idle_timer: Box::pin(tokio::time::sleep_until(deadline)),
            idle: Idle::Waiting,
            carried: false,
            ended: false,
        })
    }

    /// A ping interval for tests that watch a client stop answering.
    #[cfg(test)]
    pub(crate) fn with_ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = interval;
        self
    }
}

/// The one HEADERS frame that answers and ends a refused call.
fn trailers_only(refused: &Refusal) -> Response<()> {
    let mut response = Response::new(());
    *response.status_mut() = refused.http;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(GRPC));
    headers.insert("grpc-status", HeaderValue::from(u16::from(refused.grpc)));
    // Percent-encoded, the message is visible ASCII: always a header value.
    if let Ok(message) = HeaderValue::try_from(refusal::encode_message(&refused.message)) {
        headers.insert("grpc-message", message);
    }
    response
}

fn client_error(e: h2::Error) -> io::Error {
    h2_error_by(e, "client")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Idle {
    /// A stream is open.
    Busy,
    /// None is, and the idle timer runs.
    Waiting,
    /// The timer fired and the GOAWAY is out.
    Closing,
}

/// One HTTP/2 connection of a client and the calls it opens.
pub struct GrpcConnection {
    connection: Connection<Wire, Bytes>,
    /// What h2 left gathered, sent each time it has done all it can.
    tail: Tail,
    service: Arc<str>,
    addrs: Addrs,
    /// h2 hands out one `PingPong` a connection.
    ping: Option<PingPong>,
    ping_interval: Duration,
    pong_timeout: Duration,
    /// When the next ping is due, or, with `pong_due`, when its pong is.
    ping_timer: Pin<Box<Sleep>>,
    pong_due: bool,
    idle_limit: Duration,
    /// Until a call is carried, the deadline for the first; after, while
    /// no stream is open, when the connection is given up.
    idle_timer: Pin<Box<Sleep>>,
    idle: Idle,
    /// Whether a call was ever yielded.
    carried: bool,
    /// After `None` or an error, the connection yields nothing more.
    ended: bool,
}

impl GrpcConnection {
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.addrs.local
    }

    pub fn peer_addr(&self) -> std::net::SocketAddr {
        self.addrs.peer
    }

    /// Drives the connection, and with it every stream it yielded, until
    /// the client opens its next call to the service: that call as a
    /// [`Stream`] speaking gun (`Tun`) or its multi mode (`TunMulti`), its
    /// response head sent. A call to any other path, or that is no gRPC
    /// call, is answered with a gRPC error that ends it, and the
    /// connection goes on. `None` when the connection has ended (the
    /// client went away, or it sat idle and was closed); an error when it
    /// failed (a protocol error, or a client that stopped answering pings).
    /// After either, the connection is over: drop it.
    pub async fn next(&mut self) -> Option<io::Result<Stream>> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Stream>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let next = self.poll_call(cx);
        match self.tail.poll_flush(cx) {
            Poll::Ready(Err(e)) if next.is_pending() => {
                self.ended = true;
                Poll::Ready(Some(Err(io::Error::new(
                    e.kind(),
                    format!("grpc connection: {e}"),
                ))))
            }
            // Yielding a call, the connection is polled again at once: what
            // is left goes then.
            _ => next,
        }
    }

    fn poll_call(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<Stream>>> {
        loop {
            self.poll_idle(cx);
            if let Err(e) = self.poll_ping(cx) {
                self.ended = true;
                return Poll::Ready(Some(Err(e)));
            }
            match self.connection.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    self.ended = true;
                    return Poll::Ready(None);
                }
                Poll::Ready(Some(Err(e))) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(client_error(e))));
                }
                Poll::Ready(Some(Ok((request, respond)))) => {
                    if let Some(stream) = self.answer(request, respond) {
                        self.carried = true;
                        self.idle = Idle::Busy;
                        return Poll::Ready(Some(Ok(stream)));
                    }
                }
            }
        }
    }

    /// Answers one call: the tunnel's stream, or `None` when it was refused
    /// (or reset by the client before its answer).
    fn answer(
        &mut self,
        request: Request<RecvStream>,
        mut respond: SendResponse<Bytes>,
    ) -> Option<Stream> {
        let content_type = request.headers().get(CONTENT_TYPE).map(|t| t.as_bytes());
        let path = request.uri().path();
        let called = refusal::call(&self.service, request.method().as_str(), path, content_type);
        let message = match called {
            Ok(message) => message,
            Err(refused) => {
                tracing::debug!(
                    "grpc call from {} to {} refused: {}",
                    self.addrs.peer,
                    path,
                    refused.message
                );
                // Trailers-only; dropping the request then resets the
                // client's half, if still open, with NO_ERROR, as grpc-go
                // does.
                if let Err(e) = respond.send_response(trailers_only(&refused), true) {
                    let e = client_error(e);
                    tracing::debug!("grpc call from {} ended: {e}", self.addrs.peer);
                }
                return None;
            }
        };
        let mut response = Response::new(());
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(GRPC));
        match respond.send_response(response, false) {
            Ok(send) => Some(Stream::Grpc(Box::new(GrpcStream::serving(
                request.into_body(),
                send,
                self.addrs,
                message,
            )))),
            Err(e) => {
                tracing::debug!(
                    "grpc call from {} ended: {}",
                    self.addrs.peer,
                    client_error(e)
                );
                None
            }
        }
    }

    /// Until a call is carried, closes the connection at its first call's
    /// deadline (GOAWAY, then h2 ends it at once, whatever streams refused
    /// calls left open). After, arms the idle timer while no stream is
    /// open, and closes the connection when it fires (GOAWAY, then h2 ends
    /// it once its streams have).
    fn poll_idle(&mut self, cx: &mut Context<'_>) {
        if self.idle == Idle::Closing {
            return;
        }
        if !self.carried {
            if self.idle_timer.as_mut().poll(cx).is_ready() {
                tracing::debug!(
                    "grpc connection from {} carried no call by the handshake deadline; closing it",
                    self.addrs.peer
                );
                self.idle = Idle::Closing;
                self.connection.abrupt_shutdown(Reason::NO_ERROR);
            }
            return;
        }
        if self.connection.has_streams() {
            self.idle = Idle::Busy;
            return;
        }
        if self.idle == Idle::Busy {
            self.idle = Idle::Waiting;
            self.idle_timer
                .as_mut()
                .reset(Instant::now() + self.idle_limit);
        }
        if self.idle_timer.as_mut().poll(cx).is_ready() {
            tracing::debug!(
                "grpc connection from {} carries no call; closing it",
                self.addrs.peer
            );
            self.idle = Idle::Closing;
            self.connection.graceful_shutdown();
        }
    }

    /// Sends a ping when one is due, takes its pong, and fails the
    /// connection when the pong is late.
    fn poll_ping(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(ping) = &mut self.ping else {
            return Ok(());
        };
        loop {
            if self.pong_due {
                if let Poll::Ready(pong) = ping.poll_pong(cx) {
                    pong.map_err(client_error)?;
                    self.pong_due = false;
                    let next = Instant::now() + self.ping_interval;
                    self.ping_timer.as_mut().reset(next);
                }
            }
            if self.ping_timer.as_mut().poll(cx).is_pending() {
                return Ok(());
            }
            if self.pong_due {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "grpc: the client stopped answering pings",
                ));
            }
            ping.send_ping(Ping::opaque()).map_err(client_error)?;
            self.pong_due = true;
            let due = Instant::now() + self.pong_timeout;
            self.ping_timer.as_mut().reset(due);
        }
    }
}

mod refusal;
#[cfg(test)]
mod tests;
