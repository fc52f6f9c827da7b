//! The HTTP proxy inbound: CONNECT tunnels and absolute-form requests.

use std::io;
use std::net::SocketAddr;

use etemenanki_proto::http::{self, authorized, parse_request_head, Kind, RequestHead};
use etemenanki_proto::sniff::{http_host, Sniffed};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::sniff::reply_sniff_and_relay;
use super::{handshake_timed_out, relay_opened, Shared};
use crate::connect::{open_stream, Flow};

pub async fn serve(
    shared: &Shared,
    mut client: TcpStream,
    peer: SocketAddr,
    handshake: OwnedSemaphorePermit,
) -> io::Result<()> {
    let limit = shared.limits.load().handshake_timeout;
    let (head, mut buf) = tokio::time::timeout(limit, read_head(&mut client))
        .await
        .map_err(|_| handshake_timed_out(limit))??;
    if !authorized(&head, &shared.accounts) {
        client.write_all(http::RESPONSE_AUTH_REQUIRED).await?;
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "http: proxy authentication required",
        ));
    }
    drop(handshake);
    let early = buf.split_off(head.len);
    let mut flow = Flow {
        destination: head.destination.clone(),
        sniffed: None,
        source: Some(peer.ip()),
    };
    let sniff_ip = shared.spec.sniff && flow.destination.ip().is_some();
    match head.kind {
        Kind::Connect if sniff_ip => {
            reply_sniff_and_relay(shared, client, flow, early, http::RESPONSE_ESTABLISHED).await
        }
        Kind::Connect => match open_stream(&shared.plane, &shared.tag, &flow).await {
            Ok(opened) => {
                client.write_all(http::RESPONSE_ESTABLISHED).await?;
                relay_opened(shared, client, opened, &early).await
            }
            Err(e) => {
                client.write_all(http::RESPONSE_BAD_GATEWAY).await.ok();
                Err(e)
            }
        },
        Kind::Forward { head: mut first } => {
            if sniff_ip {
                if let Sniffed::Domain(name) = http_host(&buf) {
                    flow.sniffed = Some(name);
                }
            }
            match open_stream(&shared.plane, &shared.tag, &flow).await {
                Ok(opened) => {
                    first.extend_from_slice(&early);
                    relay_opened(shared, client, opened, &first).await
                }
                Err(e) => {
                    client.write_all(http::RESPONSE_BAD_GATEWAY).await.ok();
                    Err(e)
                }
            }
        }
    }
}

/// Reads until the request head is whole; answers 400 or 431 itself.
async fn read_head(client: &mut TcpStream) -> io::Result<(RequestHead, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "http: client closed before its request head ended",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        match parse_request_head(&buf) {
            Ok(Some(head)) => return Ok((head, buf)),
            Ok(None) => {}
            Err(e) => {
                client.write_all(e.response()).await.ok();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e.reason()));
            }
        }
    }
}
