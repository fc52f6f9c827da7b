//! socks: CONNECT through an upstream SOCKS5 server over plain TCP.

use std::io;

use etemenanki_proto::socks::client;
use etemenanki_proto::Address;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::socks_udp::SocksUdp;
use super::upstream::UpstreamDialer;

/// The longest reply a SOCKS5 server sends to CONNECT.
const MAX_REPLY: usize = 4 + 1 + 255 + 2;

pub struct Socks {
    upstream: UpstreamDialer,
}

impl Socks {
    pub fn new(upstream: UpstreamDialer) -> Socks {
        Socks { upstream }
    }

    /// Dials the server and completes the handshake: a refusal is an error
    /// here, never a stream that fails later.
    pub async fn connect(&self, destination: &Address) -> io::Result<TcpStream> {
        let mut stream = self.upstream.connect().await?;
        let request = client::connect_request(destination);
        handshake(&mut stream, self.upstream.account.as_ref(), &request)
            .await
            .map_err(closed_during_handshake)?;
        Ok(stream)
    }

    /// Opens a UDP association: a control stream to the server, then a UDP
    /// socket in the family of the relay the server names.
    pub async fn associate(&self) -> io::Result<SocksUdp> {
        let mut control = self.upstream.connect().await?;
        let relay = handshake(
            &mut control,
            self.upstream.account.as_ref(),
            &client::associate_request(),
        )
        .await
        .map_err(closed_during_handshake)?;
        let mut relay = match relay {
            Address::Ip(relay) => relay,
            Address::Domain(..) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "socks: the relay address is a domain",
                ))
            }
        };
        // An unspecified relay means the address the control connection reached.
        if relay.ip().is_unspecified() {
            relay.set_ip(control.peer_addr()?.ip());
        }
        let socket = self.upstream.bind_udp(relay.is_ipv6())?;
        Ok(SocksUdp::new(control, socket, relay))
    }
}

/// Negotiates the method, authenticates, sends `request` and returns the
/// address the reply names. Every read is sized from what came before, so
/// bytes the server sends after its reply stay in the socket.
pub async fn handshake(
    stream: &mut TcpStream,
    account: Option<&(String, String)>,
    request: &[u8],
) -> io::Result<Address> {
    let refused = |kind, text: &str| io::Error::new(kind, text.to_owned());
    stream
        .write_all(&client::greeting(account.is_some()))
        .await?;
    let mut two = [0u8; 2];
    stream.read_exact(&mut two).await?;
    client::check_method(two, account.is_some())
        .map_err(|e| refused(io::ErrorKind::PermissionDenied, e))?;
    if let Some((user, pass)) = account {
        stream.write_all(&client::auth_request(user, pass)).await?;
        stream.read_exact(&mut two).await?;
        client::check_auth(two).map_err(|e| refused(io::ErrorKind::PermissionDenied, e))?;
    }
    stream.write_all(request).await?;
    let mut reply = [0u8; MAX_REPLY];
    stream.read_exact(&mut reply[..5]).await?;
    let rest = match reply[3] {
        0x01 => 4 + 2 - 1,
        0x04 => 16 + 2 - 1,
        0x03 => usize::from(reply[4]) + 2,
        _ => 0,
    };
    stream.read_exact(&mut reply[5..5 + rest]).await?;
    match client::parse_reply(&reply[..5 + rest]) {
        Ok(Some((_, bound))) => Ok(bound),
        Ok(None) => Err(refused(
            io::ErrorKind::InvalidData,
            "socks: malformed reply",
        )),
        Err(client::ReplyError::Rejected(status)) => Err(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("server rejects request: {status}"),
        )),
        Err(client::ReplyError::Malformed(text)) => Err(refused(io::ErrorKind::InvalidData, text)),
    }
}

/// A handshake error as the seed words an early close.
pub fn closed_during_handshake(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "socks: server closed during the handshake",
        )
    } else {
        e
    }
}
