//! WebSocket under a proxy client: the upgrade to the spec's path with its Host header and the
//! default user agent, over TCP or TLS (ALPN http/1.1), then the stream of
//! binary messages as bytes ([`WsStream`]). The server side, the same
//! stream after an upgrade answered, is [`WsServer`].

mod server;
mod stream;

use std::io;

use etemenanki_ir::spec::WsEarlyData;
use etemenanki_proto::codec::{ClientCodec, ClientStep};
use etemenanki_proto::ws::{EarlyData, Upgrade};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use server::WsServer;
pub use stream::{WsStream, FRAME_BUF};

use crate::Stream;

/// The user agent of every upgrade request, a desktop Chrome's (shared with
/// gRPC): a proxy's handshake should look like a browser's.
pub const DEFAULT_USER_AGENT: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) \
AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";

/// The longest frame a server may send. Frames are read as they come,
/// never held whole, so this bounds no memory; it is tungstenite's
/// default, which this client had before it framed its own.
const MAX_FRAME_FROM_SERVER: u64 = 16 << 20;

/// The longest answer head read before giving up, as the codec has it.
const UPGRADE_READ_MAX: usize = 8 * 1024 + 4;

/// How one outbound upgrades its connections.
#[derive(Clone, Debug)]
pub struct WsSettings {
    pub host: String,
    pub path: String,
    pub early_data: Option<WsEarlyData>,
}

impl WsSettings {
    /// What of `first`, the stream's first bytes, rides in the upgrade
    /// request: up to the allowance, the rest written after it, as
    /// sing-box sends it.
    pub fn early<'a>(&'a self, first: &'a [u8]) -> Option<EarlyData<'a>> {
        let early = self.early_data.as_ref()?;
        let max = usize::try_from(early.max).unwrap_or(usize::MAX);
        let bytes = &first[..first.len().min(max)];
        (!bytes.is_empty()).then_some(EarlyData {
            header: &early.header,
            bytes,
        })
    }

    /// Upgrades `stream`, carrying `early` in the request if given.
    pub async fn upgrade(
        &self,
        mut stream: Stream,
        early: Option<EarlyData<'_>>,
    ) -> io::Result<WsStream> {
        // The upgrade's key, and the seed of the masking keys.
        let (mut nonce, mut seed) = ([0u8; 16], [0u8; 8]);
        openssl::rand::rand_bytes(&mut nonce).map_err(io::Error::other)?;
        openssl::rand::rand_bytes(&mut seed).map_err(io::Error::other)?;
        let mut codec = Upgrade::new(&self.host, &self.path, DEFAULT_USER_AGENT, early, &nonce);
        let mut out = Vec::with_capacity(512);
        codec.start(&mut out)?;
        stream.write_all(&out).await?;
        stream.flush().await?;
        let mut input = Vec::with_capacity(512);
        loop {
            if let Some((used, ClientStep::Open(()))) = codec.decode(&input, &mut out)? {
                // Frames the server sent right behind its answer.
                let ahead = input.split_off(used.min(input.len()));
                return Ok(WsStream::client(stream, ahead, seed, MAX_FRAME_FROM_SERVER));
            }
            input.reserve(512.min(UPGRADE_READ_MAX.saturating_sub(input.len())).max(1));
            if stream.read_buf(&mut input).await? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "websocket: the server closed the connection during the upgrade",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests;
