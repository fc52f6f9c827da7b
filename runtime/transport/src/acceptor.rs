//! The server side of a transport: the listening socket, and what turns an
//! accepted socket into the stream the protocol core reads.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use socket2::{Domain, SockRef, Socket, Type};
use tokio::net::TcpStream;

use etemenanki_ir::spec::ServerTls;

use crate::keepalive::set_keepalive;
use crate::tls::TlsAcceptor;
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
}

impl Acceptor {
    pub fn build(tls: Option<&ServerTls>) -> io::Result<Acceptor> {
        Ok(Acceptor {
            tls: tls.map(TlsAcceptor::build).transpose()?,
        })
    }

    /// The stream of one accepted socket; a layered handshake must finish
    /// within `limit`.
    pub async fn accept(&self, socket: TcpStream, limit: Duration) -> io::Result<Stream> {
        // Elsewhere an accepted socket may not inherit the listener's options.
        #[cfg(not(target_os = "linux"))]
        {
            socket.set_nodelay(true).ok();
            set_keepalive(SockRef::from(&socket));
        }
        let Some(tls) = &self.tls else {
            return Ok(Stream::Tcp(socket));
        };
        match tokio::time::timeout(limit, tls.accept(socket)).await {
            Ok(session) => Ok(Stream::Tls(Box::new(session?))),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "tls handshake timed out",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keepalive::{TCP_KEEPALIVE_IDLE, TCP_KEEPALIVE_INTERVAL};
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn accepted_sockets_have_nagle_off_and_keepalive_on() {
        let socket = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = socket.local_addr().unwrap().as_socket().unwrap();
        let listener = TcpListener::from_std(std::net::TcpListener::from(socket)).unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let mut stream = Acceptor::build(None)
            .unwrap()
            .accept(accepted, Duration::from_secs(10))
            .await
            .unwrap();
        let socket = SockRef::from(&*stream.as_plain_tcp().unwrap());
        assert!(
            socket.tcp_nodelay().unwrap(),
            "TCP_NODELAY on the accepted side"
        );
        assert!(
            socket.keepalive().unwrap(),
            "SO_KEEPALIVE on the accepted side"
        );
        assert_eq!(socket.tcp_keepalive_time().unwrap(), TCP_KEEPALIVE_IDLE);
        assert_eq!(
            socket.tcp_keepalive_interval().unwrap(),
            TCP_KEEPALIVE_INTERVAL
        );
    }
}
