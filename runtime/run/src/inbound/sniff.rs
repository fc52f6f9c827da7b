//! Collecting a flow's first bytes to sniff a domain, within the window the
//! limits give (300 ms and 4 KiB by default).

use std::io;
use std::time::Duration;

use etemenanki_proto::sniff::{sniff, Sniffed};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{relay_opened, Shared};
use crate::connect::{open_stream, Flow};

/// Sniffs a flow addressed by IP. The client sends only once it has the
/// success `reply`, so the reply goes first and the prefix is collected
/// after; a dial that then fails just closes the connection.
pub async fn reply_sniff_and_relay(
    shared: &Shared,
    mut client: TcpStream,
    mut flow: Flow,
    early: Vec<u8>,
    reply: &[u8],
) -> io::Result<()> {
    client.write_all(reply).await?;
    let mut prefix = early;
    let limits = shared.limits.load();
    flow.sniffed = sniff_prefix(
        &client,
        &mut prefix,
        limits.sniff_timeout,
        limits.sniff_max_bytes as usize,
    )
    .await;
    let opened = open_stream(&shared.plane, &shared.tag, &flow).await?;
    relay_opened(shared, client, opened, &prefix).await
}

/// Reads into `prefix` (which may already hold bytes) until a TLS SNI or an
/// HTTP Host appears, `max` bytes are held, the client ends, or `window`
/// passes. The bytes stay in `prefix` to be forwarded.
pub async fn sniff_prefix(
    client: &TcpStream,
    prefix: &mut Vec<u8>,
    window: Duration,
    max: usize,
) -> Option<String> {
    let deadline = Instant::now() + window;
    loop {
        match sniff(prefix) {
            Sniffed::Domain(name) => return Some(name),
            Sniffed::Nothing => return None,
            Sniffed::NeedMore if prefix.len() >= max => return None,
            Sniffed::NeedMore => {}
        }
        match tokio::time::timeout_at(deadline, client.readable()).await {
            Ok(Ok(())) => {}
            _ => return None,
        }
        let have = prefix.len();
        prefix.resize(max, 0);
        let read = client.try_read(&mut prefix[have..]);
        match read {
            Ok(0) => {
                prefix.truncate(have);
                return None;
            }
            Ok(n) => prefix.truncate(have + n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => prefix.truncate(have),
            Err(_) => {
                prefix.truncate(have);
                return None;
            }
        }
    }
}
