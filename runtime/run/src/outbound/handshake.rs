//! Drives a client codec over a transport stream: the one place a proxy
//! client's handshake does I/O, so the same code runs over TCP, TLS and
//! whatever layers come later. No exact-size reads and no peeking: what the
//! server sends after its reply is kept and handed to the stream's reader.

use std::io;

use etemenanki_proto::codec::{ClientCodec, ClientStep, StreamCodec};
use etemenanki_transport::{Connector, Prefixed, Stream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::framed::Framed;

/// The most a handshake reads before its answer is whole: 16 KiB, the
/// client buffer of socks and http.
const HANDSHAKE_BUF: usize = 16 * 1024;

/// A proxy's tunnel whose handshake is done, with what its server sent
/// right after its reply, in the same read: the tunnel's first bytes.
pub type Tunnel = Prefixed<Stream>;

/// The tunnel `stream`, with `ahead`, the bytes read past the handshake.
pub fn opened(stream: Stream, ahead: Vec<u8>) -> Tunnel {
    Prefixed::new(ahead, stream)
}

/// Runs `codec` over `stream` until it opens, every message written and
/// flushed. Returns the codec's reply and the bytes read past it.
pub async fn handshake<C: ClientCodec>(
    stream: &mut Stream,
    codec: &mut C,
) -> io::Result<(C::Reply, Vec<u8>)> {
    let mut out = Vec::with_capacity(C::STAGING_RESERVE);
    let step = codec.start(&mut out)?;
    // A stream just connected takes its first bytes at once, as
    // `Connector::connect_sending` sends them for [`dial`].
    let sent = stream.send_now(&out)?;
    out.drain(..sent);
    drive(stream, codec, out, step).await
}

/// What a codec that opens at once (its server answers nothing before
/// data) sends first: its request, to lead the first payload
/// ([`framed_with_request`]).
pub fn first_bytes<C: ClientCodec<Reply = ()>>(codec: &mut C) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(C::STAGING_RESERVE);
    match codec.start(&mut out)? {
        ClientStep::Open(()) => Ok(out),
        ClientStep::Read => Err(io::Error::other(
            "codec waits for an answer before its stream opens",
        )),
    }
}

/// `stream` framed by `codec`, with `request` leading the first payload in
/// one segment. On plain TCP the kernel holds it
/// ([`etemenanki_transport::dial::send_ahead`]) until the first payload's
/// send, or sends it alone within TCP's 200 ms cork ceiling, with no timer
/// of ours. Over TLS, WebSocket or gRPC the framed stream holds it
/// ([`Framed::with_header`]) and the relay sends it alone when the client
/// says nothing first ([`crate::relay::FIRST_PAYLOAD_WAIT`]).
pub fn framed_with_request<C: StreamCodec, const BUF: usize>(
    stream: Stream,
    codec: C,
    request: &[u8],
) -> io::Result<Framed<Stream, C, BUF>> {
    let sent = stream.send_ahead(request)?;
    Ok(Framed::with_header(
        stream,
        codec,
        Vec::new(),
        &request[sent..],
    ))
}

/// Dials with `connector` and runs `codec` over the stream, its first
/// bytes inside the transport's own handshake where the transport carries
/// early data (a WebSocket's, when the plan asks for it).
pub async fn dial<C: ClientCodec>(
    connector: &Connector,
    codec: &mut C,
) -> io::Result<(Stream, C::Reply, Vec<u8>)> {
    let mut out = Vec::with_capacity(C::STAGING_RESERVE);
    let step = codec.start(&mut out)?;
    let (mut stream, sent) = connector.connect_sending(&out).await?;
    out.drain(..sent.min(out.len()));
    let (reply, ahead) = drive(&mut stream, codec, out, step).await?;
    Ok((stream, reply, ahead))
}

async fn drive<C: ClientCodec>(
    stream: &mut Stream,
    codec: &mut C,
    mut out: Vec<u8>,
    mut step: ClientStep<C::Reply>,
) -> io::Result<(C::Reply, Vec<u8>)> {
    let mut input = Vec::new();
    loop {
        if !out.is_empty() {
            stream.write_all(&out).await?;
            stream.flush().await?;
            out.clear();
        }
        if let ClientStep::Open(reply) = step {
            return Ok((reply, input));
        }
        step = loop {
            if let Some((used, next)) = codec.decode(&input, &mut out)? {
                if used > input.len() {
                    return Err(io::Error::other(
                        "codec consumed more reply than it was given",
                    ));
                }
                input.drain(..used);
                break next;
            }
            if input.len() >= HANDSHAKE_BUF {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "upstream frame larger than the client runtime's buffer",
                ));
            }
            input.reserve(512.min(HANDSHAKE_BUF - input.len()));
            if stream.read_buf(&mut input).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "upstream closed during the handshake",
                ));
            }
        };
    }
}
