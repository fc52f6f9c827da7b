//! Collecting a flow's first bytes to sniff a domain, within the window the
//! limits give (300 ms and 4 KiB by default).

use std::time::Duration;

use etemenanki_proto::sniff::{sniff, Sniffed};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::time::Instant;

/// Reads into `prefix` (which may already hold bytes) until a TLS SNI or an
/// HTTP Host appears, `max` bytes are held, the client ends, or `window`
/// passes. The bytes stay in `prefix` to be forwarded.
pub async fn sniff_prefix<S: AsyncRead + Unpin>(
    client: &mut S,
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
        let have = prefix.len();
        prefix.resize(max, 0);
        // A read cut short by the deadline has taken no bytes.
        let read = tokio::time::timeout_at(deadline, client.read(&mut prefix[have..])).await;
        match read {
            Ok(Ok(n)) if n > 0 => prefix.truncate(have + n),
            _ => {
                prefix.truncate(have);
                return None;
            }
        }
    }
}
