//! http: CONNECT through an upstream HTTP proxy over plain TCP.

use std::io;

use etemenanki_proto::http::client::{connect_request, parse_connect_response, ResponseError};
use etemenanki_proto::http::head_end;
use etemenanki_proto::Address;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::upstream::UpstreamDialer;

/// The longest response head accepted from the proxy.
const MAX_RESPONSE_HEAD: usize = 8 * 1024;

pub struct Http {
    upstream: UpstreamDialer,
}

impl Http {
    pub fn new(upstream: UpstreamDialer) -> Http {
        Http { upstream }
    }

    /// Dials the proxy and opens the tunnel; a refusal is an error here.
    pub async fn connect(&self, destination: &Address) -> io::Result<TcpStream> {
        let mut stream = self.upstream.connect().await?;
        let account = self
            .upstream
            .account
            .as_ref()
            .map(|(u, p)| (u.as_str(), p.as_str()));
        stream
            .write_all(&connect_request(destination, account))
            .await?;
        let head = read_response_head(&mut stream).await?;
        match parse_connect_response(&head) {
            Ok(Some(_)) => Ok(stream),
            Ok(None) | Err(ResponseError::Malformed) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "http: malformed CONNECT response",
            )),
            Err(ResponseError::Status(code)) => Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("http: the proxy answered CONNECT with {code}"),
            )),
        }
    }
}

/// Reads exactly the response head: bytes the tunnel carries after it (a
/// server that speaks first) stay in the socket for the relay.
async fn read_response_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "http: proxy closed before answering CONNECT",
            ));
        }
        // The blank line may straddle what was taken and what is peeked.
        let kept = head.len().saturating_sub(3);
        let mut window = head[kept..].to_vec();
        window.extend_from_slice(&buf[..n]);
        let take = match head_end(&window) {
            Some(end) => end - (head.len() - kept),
            None => n,
        };
        stream.read_exact(&mut buf[..take]).await?;
        head.extend_from_slice(&buf[..take]);
        if head_end(&head).is_some() {
            return Ok(head);
        }
        if head.len() > MAX_RESPONSE_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "http: CONNECT response head too long",
            ));
        }
    }
}
