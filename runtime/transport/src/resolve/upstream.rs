//! One upstream DNS server and how a query is exchanged with it: plain DNS
//! over UDP with TCP for a truncated answer, DNS over TLS (RFC 7858), DNS
//! over HTTPS (RFC 8484, a POST over HTTP/2). The bytes go through a
//! [`Carrier`].

use std::io;

use bytes::Bytes;
use etemenanki_ir::spec::{DnsServer, HostPort};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::carrier::{answers, Carrier, DnsStream, MAX_MESSAGE};
use crate::tls::TlsConnector;

pub enum Upstream {
    Plain(std::net::SocketAddr),
    Tls {
        server: HostPort,
        tls: TlsConnector,
    },
    Https {
        server: HostPort,
        uri: String,
        tls: TlsConnector,
    },
}

impl Upstream {
    /// Prepares `spec`: the TLS configuration and its CA bundle are built
    /// now, so a bad one fails the apply, not a query.
    pub fn build(spec: &DnsServer) -> io::Result<Upstream> {
        Ok(match spec {
            DnsServer::Plain(addr) => Upstream::Plain(*addr),
            DnsServer::Tls { server, tls } => Upstream::Tls {
                server: server.clone(),
                tls: TlsConnector::build(tls, &[])?,
            },
            DnsServer::Https { server, path, tls } => Upstream::Https {
                uri: format!("https://{server}{path}"),
                server: server.clone(),
                tls: TlsConnector::build(tls, &["h2"])?,
            },
        })
    }

    /// Sends `query` and returns the answer's bytes (with the query's id).
    pub async fn exchange(&self, carrier: &dyn Carrier, query: &[u8]) -> io::Result<Vec<u8>> {
        match self {
            Upstream::Plain(addr) => {
                let answer = carrier.exchange_udp(*addr, query).await?;
                // The TC bit: the answer did not fit; ask again over TCP.
                if answer.get(2).is_some_and(|flags| flags & 0x02 != 0) {
                    let server = HostPort {
                        host: etemenanki_ir::spec::Host::Ip(addr.ip()),
                        port: addr.port(),
                    };
                    let mut stream = carrier.connect(&server).await?;
                    return exchange_framed(&mut stream, query).await;
                }
                Ok(answer)
            }
            Upstream::Tls { server, tls } => {
                let stream = carrier.connect(server).await?;
                let mut tls = tls.connect(stream).await?;
                exchange_framed(&mut tls, query).await
            }
            Upstream::Https { server, uri, tls } => {
                let stream = carrier.connect(server).await?;
                let tls = tls.connect(stream).await?;
                post(tls, uri, query).await
            }
        }
    }
}

/// DNS over a byte stream: each message after its 2-byte length.
pub async fn exchange_framed<S: DnsStream + ?Sized>(
    stream: &mut S,
    query: &[u8],
) -> io::Result<Vec<u8>> {
    let len = u16::try_from(query.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "dns: query too long"))?;
    let mut framed = Vec::with_capacity(2 + query.len());
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(query);
    stream.write_all(&framed).await?;
    stream.flush().await?;
    loop {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await?;
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut answer).await?;
        if answers(query, &answer) {
            return Ok(answer);
        }
    }
}

/// One POST of `query` to `uri` over a fresh HTTP/2 connection on `stream`.
async fn post<S>(stream: S, uri: &str, query: &[u8]) -> io::Result<Vec<u8>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let h2_error = |e: h2::Error| io::Error::other(format!("dns over https: {e}"));
    let (mut client, connection) = h2::client::handshake(stream).await.map_err(h2_error)?;
    let request = http::Request::post(uri)
        .header("content-type", "application/dns-message")
        .header("accept", "application/dns-message")
        .body(())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("dns over https: {e}")))?;
    let exchange = async {
        let (response, mut body) = client.send_request(request, false).map_err(h2_error)?;
        body.send_data(Bytes::copy_from_slice(query), true)
            .map_err(h2_error)?;
        let response = response.await.map_err(h2_error)?;
        if response.status() != http::StatusCode::OK {
            return Err(io::Error::other(format!(
                "dns over https: the server answered {}",
                response.status()
            )));
        }
        let mut body = response.into_body();
        let mut answer = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(h2_error)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            if answer.len() + chunk.len() > MAX_MESSAGE {
                return Err(io::Error::other("dns over https: the answer is too long"));
            }
            answer.extend_from_slice(&chunk);
        }
        Ok(answer)
    };
    tokio::pin!(connection);
    tokio::select! {
        answer = exchange => answer,
        ended = &mut connection => Err(match ended {
            Ok(()) => io::Error::new(io::ErrorKind::UnexpectedEof, "dns over https: the connection closed"),
            Err(e) => h2_error(e),
        }),
    }
}

impl Upstream {
    /// The server as the configuration wrote it, for errors and logs.
    pub fn name(&self) -> String {
        match self {
            Upstream::Plain(addr) => addr.to_string(),
            Upstream::Tls { server, .. } => format!("tls://{server}"),
            Upstream::Https { uri, .. } => uri.clone(),
        }
    }
}
