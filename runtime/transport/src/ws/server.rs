//! WebSocket under an inbound, over the accepted TCP or TLS stream: the
//! upgrade request read
//! and answered, then the stream of binary messages as bytes
//! ([`WsStream`]).
//!
//! Each request head is answered as Xray's server, a Go web server,
//! answers it ([`Upgrader`] says how): a 404 for another path or Host, a
//! 400 for what is no upgrade at the path, each dated and keeping the
//! connection for the client's next request as Go's keep-alive does, so
//! that a prober, pipelining or not, cannot tell the port from Xray's.
//! The first valid upgrade is answered with the 101 and the connection
//! becomes the WebSocket; frames a client sends right behind its request
//! are kept. The caller's deadline bounds the whole, however many
//! requests come before an upgrade.

use std::io;
use std::time::SystemTime;

use etemenanki_proto::ws::{
    request_end, Answer, Refusal, Upgrader, MAX_DISCARDED_BODY, RESPONSE_TOO_LARGE,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::WsStream;
use crate::Stream;

/// The longest request head read before refusing it with a 431: room for
/// the headers a browser sends and 8 KiB of early data.
const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// The largest frame a client may send: clients write one frame per write
/// of their relay, ours up to 64 KiB. Frames are read as they come, never
/// held whole, so this bounds no memory; it is the bound this server had
/// when tungstenite, which holds a frame whole, read its frames.
const MAX_FRAME_FROM_CLIENT: u64 = 1024 * 1024;

/// How one inbound takes its upgrades.
#[derive(Clone, Debug)]
pub struct WsServer {
    upgrader: Upgrader,
}

impl WsServer {
    /// `path` is the request path served; a query string after it is
    /// ignored (Xray's clients put `?ed=2048` there). `host`, when set, is
    /// the Host a request must name.
    pub fn new(path: &str, host: Option<&str>) -> Self {
        WsServer {
            upgrader: Upgrader::new(path, host),
        }
    }

    /// Reads requests from `stream` and answers each until one is a valid
    /// upgrade. A refused request gets its HTTP answer; the error, once
    /// the client or the answer closes the connection, says why the last
    /// one was refused. The caller bounds the time this takes.
    pub async fn accept(&self, mut stream: Stream) -> io::Result<WsStream> {
        let mut input = Vec::with_capacity(1024);
        let mut refused: Option<Refusal> = None;
        loop {
            let len =
                match (read_head(&mut stream, &mut input).await, refused) {
                    (Ok(Some(len)), _) => len,
                    // A client that went away, however it closed, without a
                    // byte of another request: the last refusal is why.
                    (Ok(None) | Err(_), Some(refusal)) if input.is_empty() => {
                        return Err(refusal.into_error())
                    }
                    (Ok(None), _) => return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "websocket: the client closed the connection before its upgrade request",
                    )),
                    (Err(e), _) => return Err(e),
                };
            let refusal = match self.upgrader.answer(&input[..len]) {
                Answer::Upgrade { response, early } => {
                    stream.write_all(&response).await?;
                    stream.flush().await?;
                    // Frames the client sent right behind its request.
                    let ahead = input.split_off(len);
                    return Ok(WsStream::server(
                        stream,
                        ahead,
                        early,
                        MAX_FRAME_FROM_CLIENT,
                    ));
                }
                Answer::Refuse(refusal) => refusal,
            };
            input.drain(..len);
            if !discard(&mut stream, &mut input, refusal.body()).await? {
                return Err(refusal.into_error());
            }
            let mut answer = Vec::with_capacity(256);
            refusal.write(SystemTime::now(), &mut answer);
            if !refusal.keeps_alive() {
                return Err(refuse(&mut stream, &answer, refusal.into_error()).await);
            }
            stream.write_all(&answer).await?;
            stream.flush().await?;
            tracing::debug!(
                "websocket request refused, connection kept: {}",
                refusal.error()
            );
            refused = Some(refusal);
        }
    }
}

/// Reads until `input` holds a whole request head; its length, or `None`
/// when the client closed first. A head too long is answered with a 431
/// and the connection closed.
async fn read_head(stream: &mut Stream, input: &mut Vec<u8>) -> io::Result<Option<usize>> {
    loop {
        if let Some(len) = request_end(input) {
            return Ok(Some(len));
        }
        if input.len() >= MAX_REQUEST_HEAD {
            let error = invalid("websocket: the upgrade request head is too long");
            return Err(refuse(stream, RESPONSE_TOO_LARGE, error).await);
        }
        input.reserve(1024.min(MAX_REQUEST_HEAD - input.len()));
        if stream.read_buf(input).await? == 0 {
            return Ok(None);
        }
    }
}

/// Reads and drops the `body` bytes that follow a refused request's head,
/// those already in `input` first, leaving in `input` what follows them;
/// `false` when the client closed first.
async fn discard(stream: &mut Stream, input: &mut Vec<u8>, body: u64) -> io::Result<bool> {
    debug_assert!(body <= MAX_DISCARDED_BODY);
    let mut left = usize::try_from(body).unwrap_or(usize::MAX);
    loop {
        let here = left.min(input.len());
        input.drain(..here);
        left -= here;
        if left == 0 {
            return Ok(true);
        }
        input.reserve(left.min(MAX_REQUEST_HEAD));
        if stream.read_buf(input).await? == 0 {
            return Ok(false);
        }
    }
}

fn invalid(text: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, text)
}

/// Sends `response` and closes the connection; returns `error`.
async fn refuse(stream: &mut Stream, response: &[u8], error: io::Error) -> io::Error {
    // The client may be gone already; the refusal is the error either way.
    if stream.write_all(response).await.is_ok() {
        let _ = stream.shutdown().await;
    }
    error
}
