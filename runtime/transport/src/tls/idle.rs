//! Record buffers given back while a session is idle.
//!
//! OpenSSL's `SSL_MODE_RELEASE_BUFFERS` (the openssl crate sets it) frees a
//! connection's read buffer when it runs dry and its write buffer when a
//! write completes. A post-handshake message breaks the second half: to
//! read a TLS 1.3 NewSessionTicket, OpenSSL 3.0 sets up both record buffers
//! again, and the write buffer (17 KiB of heap, about 7 KiB of it resident)
//! then stays until the next write completes. A client whose last write
//! went out before the server's tickets came in (a trojan client waiting
//! for its target's answer, an idle connection) keeps it for its life.
//! `SSL_free_buffers` releases both buffers when neither holds a byte.

use std::os::raw::c_int;
use std::sync::LazyLock;

use foreign_types::ForeignTypeRef;
use openssl::ssl::SslRef;

extern "C" {
    /// libssl's, since 1.1.0 (the openssl crate does not bind it): frees
    /// the read and write buffers unless a record is pending in either,
    /// and says which (1 freed, 0 in use).
    fn SSL_free_buffers(ssl: *mut openssl_sys::SSL) -> c_int;
}

/// Gives back the record buffers of a session that has nothing to read
/// now, if neither holds a byte; it allocates nothing and fails never (a
/// buffer in use is simply kept). True if OpenSSL holds no record, read or
/// to send, of the session (what a hand-over of its records needs). Under
/// a libssl older than the fix of CVE-2024-4741 it does nothing, and says
/// false.
pub(super) fn release_buffers(ssl: &SslRef) -> bool {
    // The linked libssl does not change while the process runs: asked once.
    static SAFE: LazyLock<bool> =
        LazyLock::new(|| frees_only_unused_buffers(openssl::version::number()));
    *SAFE && free_buffers(ssl)
}

#[allow(unsafe_code)]
fn free_buffers(ssl: &SslRef) -> bool {
    // SAFETY: `ssl.as_ptr()` is a live SSL for the whole call (`ssl` borrows
    // it). SSL_free_buffers refuses when a buffer holds a partial or
    // unprocessed record or an unsent one (all three checked since the fix
    // of CVE-2024-4741, which `release_buffers` requires), and nothing of
    // ours points into OpenSSL's buffers: the BIO under the session is our
    // own `Wire`, with buffers of its own.
    unsafe { SSL_free_buffers(ssl.as_ptr()) == 1 }
}

/// Whether libssl `version` (`OPENSSL_VERSION_NUMBER`, 0xMNN00PP0 for
/// 3.x) has the fix of CVE-2024-4741: 3.0.14, 3.1.6, 3.2.2, 3.3.1 and
/// every later 3.x.
fn frees_only_unused_buffers(version: i64) -> bool {
    let (major, minor, patch) = (version >> 28, (version >> 20) & 0xff, (version >> 4) & 0xff);
    match (major, minor) {
        (3, 0) => patch >= 14,
        (3, 1) => patch >= 6,
        (3, 2) => patch >= 2,
        (3, 3) => patch >= 1,
        (major, _) => major >= 3,
    }
}

#[cfg(test)]
mod tests {
    use super::frees_only_unused_buffers;

    #[test]
    fn only_a_libssl_with_the_fix_of_cve_2024_4741_frees_buffers() {
        for (version, fixed) in [
            (0x1010_117f, false), // 1.1.1w
            (0x3000_00d0, false), // 3.0.13
            (0x3000_00e0, true),  // 3.0.14
            (0x3000_0130, true),  // 3.0.19
            (0x3010_0050, false), // 3.1.5
            (0x3010_0060, true),  // 3.1.6
            (0x3020_0010, false), // 3.2.1
            (0x3020_0020, true),  // 3.2.2
            (0x3030_0000, false), // 3.3.0
            (0x3030_0010, true),  // 3.3.1
            (0x3040_0000, true),  // 3.4.0
        ] {
            assert_eq!(frees_only_unused_buffers(version), fixed, "{version:#x}");
        }
    }
}

#[cfg(test)]
mod stream_tests {
    use crate::tls::tests::{ends, pki};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// Forwards `from` to `to` a few bytes a write, so that the reader
    /// behind `to` keeps finding part of a record and nothing more.
    async fn trickle(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
    ) {
        let mut buf = [0; 7];
        // Bounded: the bytes the test sends this way, 7 at a time.
        for _ in 0..1 << 16 {
            let n = from.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            to.write_all(&buf[..n]).await.unwrap();
            tokio::task::yield_now().await;
        }
        to.shutdown().await.unwrap();
    }

    #[tokio::test]
    async fn records_trickling_in_past_an_idle_client_arrive_whole() {
        // The server's ticket reaches the client after its last write, and
        // every record after it comes a few bytes at a time: the client's
        // reads keep ending in a partial record, each time going idle and
        // letting go of what buffers it can, and every byte still arrives.
        let pki = pki();
        let (acceptor, connector) = ends(&pki);
        let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server_addr = server.local_addr().unwrap();
        let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let relay_addr = relay.local_addr().unwrap();
        let answer: Vec<u8> = (0..20_002u32).map(|i| (i % 253) as u8).collect();
        let upload: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        let forward = async {
            let (client, _) = relay.accept().await.unwrap();
            let upstream = TcpStream::connect(server_addr).await.unwrap();
            client.set_nodelay(true).unwrap();
            let (client_read, client_write) = client.into_split();
            let (up_read, mut up_write) = upstream.into_split();
            let mut client_read = client_read;
            let up = async {
                tokio::io::copy(&mut client_read, &mut up_write)
                    .await
                    .unwrap();
                up_write.shutdown().await.unwrap();
            };
            tokio::join!(up, trickle(up_read, client_write));
        };
        let serve = async {
            let (tcp, _) = server.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let mut hello = [0; 5];
            tls.read_exact(&mut hello).await.unwrap();
            for part in [&answer[..1], &answer[1..20_001], &answer[20_001..]] {
                tls.write_all(part).await.unwrap();
                tls.flush().await.unwrap();
            }
            let mut got = Vec::new();
            tls.read_to_end(&mut got).await.unwrap();
            tls.shutdown().await.unwrap();
            got
        };
        let dial = async {
            let tcp = TcpStream::connect(relay_addr).await.unwrap();
            let mut tls = connector.connect(tcp).await.unwrap();
            tls.write_all(b"hello").await.unwrap();
            tls.flush().await.unwrap();
            let mut got = vec![0; answer.len()];
            tls.read_exact(&mut got).await.unwrap();
            tls.write_all(&upload).await.unwrap();
            tls.shutdown().await.unwrap();
            let mut rest = Vec::new();
            tls.read_to_end(&mut rest).await.unwrap();
            got
        };
        let ((), got_upload, got_answer) = tokio::join!(forward, serve, dial);
        assert!(got_answer == answer, "the answer arrived changed");
        assert!(got_upload == upload, "the upload arrived changed");
    }
}
