//! The server side of a transport: the listening socket, and what turns an
//! accepted socket into the streams the protocol core reads, layered in the
//! order they run: TLS, then a WebSocket upgrade or an HTTP/2 connection whose
//! gRPC calls are each a stream, all within the transport's time limit.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, SockRef, Socket, Type};
use tokio::net::TcpStream;
use tokio::time::Instant;

use etemenanki_ir::spec::{Limits, ServerShape, ServerTls};

use crate::grpc::{GrpcConnection, GrpcServer};
use crate::keepalive::set_keepalive;
use crate::tls::TlsAcceptor;
use crate::ws::WsServer;
use crate::Stream;

const BACKLOG: i32 = 1024;

/// Binds and listens on `addr`. Options every accepted socket needs are set
/// here, on the listener, because Linux gives accepted sockets the
/// listener's: TCP_NODELAY (a relay forwards what it reads at once; Nagle
/// would only add delay) and the keepalive schedule. That spares two
/// setsockopt calls per connection.
pub fn listen(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(false).ok();
    }
    socket.set_nonblocking(true)?;
    socket.set_tcp_nodelay(true)?;
    set_keepalive(SockRef::from(&socket));
    socket
        .bind(&addr.into())
        .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
    socket.listen(BACKLOG)?;
    Ok(socket)
}

/// Built once per inbound from its transport spec: a certificate or key
/// that does not load fails the apply, never a connection.
pub struct Acceptor {
    tls: Option<TlsAcceptor>,
    shape: Shape,
}

/// What is layered over TCP or TLS.
enum Shape {
    Tcp,
    Ws(WsServer),
    Grpc(GrpcServer),
}

/// What one accepted socket became.
///
/// How an inbound serves it: a `Stream` as it is, in the socket's task. A
/// `Grpc` connection stays in the socket's task, which loops on
/// [`GrpcConnection::next`] and spawns one task per stream it yields, each
/// holding a clone of the socket's live-connection permit, so that the slot
/// is returned when the last of them ends. The loop must go on while those
/// tasks run (h2 moves their bytes only inside `next`), until `next` says
/// `None` or fails; dropping the connection ends every stream on it.
///
/// ```text
/// match acceptor.accept(socket, &limits).await? {
///     Accepted::Stream(stream) => serve(stream, session).await,
///     Accepted::Grpc(mut connection) => {
///         while let Some(stream) = connection.next().await {
///             tokio::spawn(serve(stream?, session.clone()));
///         }
///     }
/// }
/// ```
pub enum Accepted {
    /// The one stream of a tcp, tls or ws transport.
    Stream(Stream),
    /// An HTTP/2 connection: each call it yields is a stream. See
    /// [`GrpcConnection`] for how it must be driven. Boxed: h2's connection
    /// state is over a KiB.
    Grpc(Box<GrpcConnection>),
}

impl Acceptor {
    /// For `shape` under `tls` when present: an inbound's
    /// `InboundTransport`, or `ServerShape::Tcp` for socks and http. The
    /// TLS ALPN is the plan's, or http/1.1 for ws and h2 for grpc when the
    /// plan names none.
    pub fn build(shape: &ServerShape, tls: Option<&ServerTls>) -> io::Result<Acceptor> {
        let (shape, alpn): (Shape, &[&str]) = match shape {
            ServerShape::Tcp => (Shape::Tcp, &[]),
            ServerShape::Ws { path, host } => (
                Shape::Ws(WsServer::new(path, host.as_deref())),
                &["http/1.1"],
            ),
            ServerShape::Grpc { service_name } => {
                (Shape::Grpc(GrpcServer::new(service_name)), &["h2"])
            }
        };
        Ok(Acceptor {
            tls: tls.map(|tls| TlsAcceptor::build(tls, alpn)).transpose()?,
            shape,
        })
    }

    /// Takes one accepted socket through the transport's handshakes (TLS,
    /// the WebSocket upgrade, the HTTP/2 preface), all of them together
    /// within `limits.handshake_timeout`; the error at the limit names the
    /// layer that was late (`tls handshake timed out`, `websocket handshake
    /// timed out`, `grpc handshake timed out`). A gRPC connection's
    /// liveness takes its time limits from `limits` too, and it is closed
    /// at that same deadline if it has carried no call by then.
    pub async fn accept(&self, socket: TcpStream, limits: &Limits) -> io::Result<Accepted> {
        // Elsewhere an accepted socket may not inherit the listener's options.
        #[cfg(not(target_os = "linux"))]
        {
            socket.set_nodelay(true).ok();
            set_keepalive(SockRef::from(&socket));
        }
        let deadline = Instant::now() + limits.handshake_timeout;
        let stream = match &self.tls {
            None => Stream::Tcp(socket),
            Some(tls) => {
                let session = within(deadline, "tls handshake timed out", tls.accept(socket));
                Stream::Tls(Box::new(session.await?))
            }
        };
        Ok(match &self.shape {
            Shape::Tcp => Accepted::Stream(stream),
            Shape::Ws(ws) => {
                let upgraded = within(deadline, "websocket handshake timed out", ws.accept(stream));
                Accepted::Stream(Stream::Ws(Box::new(upgraded.await?)))
            }
            Shape::Grpc(grpc) => {
                let connection = grpc.accept(stream, limits, deadline);
                let connection = within(deadline, "grpc handshake timed out", connection).await?;
                Accepted::Grpc(Box::new(connection))
            }
        })
    }

    /// A gRPC acceptor that pings every `interval`, for tests that watch a
    /// client stop answering.
    #[cfg(test)]
    fn with_ping_interval(mut self, interval: std::time::Duration) -> Self {
        if let Shape::Grpc(grpc) = self.shape {
            self.shape = Shape::Grpc(grpc.with_ping_interval(interval));
        }
        self
    }
}

/// `handshake` by `deadline`, or a TimedOut error saying `late`.
async fn within<T>(
    deadline: Instant,
    late: &'static str,
    handshake: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match tokio::time::timeout_at(deadline, handshake).await {
        Ok(done) => done,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, late)),
    }
}

#[cfg(test)]
pub(crate) mod tests;
