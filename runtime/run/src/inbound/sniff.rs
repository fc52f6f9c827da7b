//! Collecting a flow's first bytes to sniff a domain, within the window the
//! limits give (300 ms and 4 KiB by default).

use std::time::Duration;

use etemenanki_proto::sniff::{sniff, Sniffed};
use tokio::net::TcpStream;
use tokio::time::Instant;

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
