//! socks: CONNECT through an upstream SOCKS5 server over plain TCP.

use std::io;

use etemenanki_proto::socks::client;
use etemenanki_proto::Address;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

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
        handshake(&mut stream, self.upstream.account.as_ref(), destination)
            .await
            .map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "socks: server closed during the handshake",
                    )
                } else {
                    e
                }
            })?;
        Ok(stream)
    }
}

async fn handshake(
    stream: &mut TcpStream,
    account: Option<&(String, String)>,
    destination: &Address,
) -> io::Result<()> {
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
    stream
        .write_all(&client::connect_request(destination))
        .await?;
    let mut reply = [0u8; MAX_REPLY];
    let mut have = 0;
    loop {
        let n = stream.read(&mut reply[have..]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        have += n;
        match client::parse_reply(&reply[..have]) {
            Ok(Some(len)) if len == have => return Ok(()),
            Ok(Some(_)) => {
                return Err(refused(
                    io::ErrorKind::InvalidData,
                    "socks: data before the reply ended",
                ))
            }
            Ok(None) if have < MAX_REPLY => continue,
            Ok(None) => return Err(refused(io::ErrorKind::InvalidData, "socks: reply too long")),
            Err(client::ReplyError::Rejected(status)) => {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    format!("server rejects request: {status}"),
                ))
            }
            Err(client::ReplyError::Malformed(text)) => {
                return Err(refused(io::ErrorKind::InvalidData, text))
            }
        }
    }
}
