//! What the runtime needs from OpenSSL to protect a TLS 1.3 session's
//! records itself once the handshake is over: both application traffic
//! secrets, and the sequence number of the next record each way.
//!
//! OpenSSL 3.0 offers no call for either, but it reports both as they
//! happen: the key log callback (SSLKEYLOGFILE's lines) hands over every
//! secret of the handshake, and the message callback sees every record
//! header and every handshake message, read or written. A session's
//! [`Track`] counts records from each direction's Finished on (the
//! message after which that direction's application keys are in use) and
//! notes KeyUpdates: a session whose secrets moved on before it was handed
//! over stays with OpenSSL (it never happens to a session handed over at
//! its first idle moment in practice, and what it would take to follow is
//! not worth a rare case).

use std::os::raw::{c_int, c_void};
use std::sync::{Mutex, OnceLock, PoisonError};

use etemenanki_proto::tls13::{Keys, Sender, Suite};
use foreign_types::ForeignTypeRef;
use openssl::ex_data::Index;
use openssl::ssl::{Ssl, SslContextBuilder, SslRef, SslVersion};

/// A handshake message's type byte: Finished and KeyUpdate (RFC 8446 4).
const FINISHED: u8 = 20;
const KEY_UPDATE: u8 = 24;
/// `content_type` values of the message callback (ssl3.h).
const RT_HANDSHAKE: c_int = 22;
const RT_HEADER: c_int = 0x100;
/// The longest traffic secret (SHA-384's).
const SECRET_MAX: usize = 48;

/// One direction of a session, as the message callback has seen it.
#[derive(Default)]
struct Direction {
    /// Its application traffic secret 0, from the key log.
    secret: Option<([u8; SECRET_MAX], usize)>,
    /// Whether its Finished has gone by: records since are under the
    /// application keys.
    established: bool,
    /// Records since the Finished.
    records: u64,
    /// Whether a KeyUpdate went by after the Finished.
    updated: bool,
}

impl Direction {
    fn record(&mut self) {
        self.records += 1;
    }

    fn message(&mut self, kind: u8) {
        match kind {
            FINISHED => {
                self.established = true;
                self.records = 0;
            }
            KEY_UPDATE if self.established => self.updated = true,
            _ => {}
        }
    }

    /// The keys of the next record, once the direction is established and
    /// its secret known.
    fn keys(&self, suite: Suite) -> Option<Keys> {
        let (secret, len) = self
            .secret
            .as_ref()
            .filter(|_| self.established && !self.updated)?;
        Keys::new(suite, &secret[..*len], self.records).ok()
    }
}

/// A session's two directions, from the point of view of its own side.
#[derive(Default)]
pub(super) struct Track {
    client: Direction,
    server: Direction,
}

/// The keys a session's records go on with, read and write.
pub(super) struct Handover {
    pub(super) read: Keys,
    pub(super) write: Keys,
    /// The side whose records `read` opens.
    pub(super) peer: Sender,
}

impl Track {
    /// Starts tracking `ssl`, before its handshake: key log lines and
    /// messages of this session land in its own `Track`. Without an index
    /// (OpenSSL could not make one) the session is simply never handed over.
    pub(super) fn attach(ssl: &mut SslRef) {
        if let Some(index) = index() {
            ssl.set_ex_data(index, Mutex::new(Track::default()));
            set_message_callback(ssl);
        }
    }

    /// The keys to take `ssl`'s records over with, if it is a TLS 1.3
    /// session of a suite we seal, with both secrets known and both
    /// directions past their Finished; None otherwise (it stays with
    /// OpenSSL). `ssl` must have no record buffered, half read or unsent.
    pub(super) fn handover(ssl: &SslRef) -> Option<Handover> {
        if ssl.version2() != Some(SslVersion::TLS1_3) {
            return None;
        }
        let id = ssl.current_cipher()?.protocol_id();
        let suite = Suite::from_id(u16::from_be_bytes(id))?;
        let track = ssl.ex_data(index()?)?;
        let track = track.lock().unwrap_or_else(PoisonError::into_inner);
        let (read, write, peer) = if ssl.is_server() {
            (&track.client, &track.server, Sender::Client)
        } else {
            (&track.server, &track.client, Sender::Server)
        };
        Some(Handover {
            read: read.keys(suite)?,
            write: write.keys(suite)?,
            peer,
        })
    }

    /// Whether the side reading `ssl` has read a record under the
    /// application keys (a client: a session ticket, or the first answer).
    pub(super) fn has_read(ssl: &SslRef) -> bool {
        let Some(track) = index().and_then(|index| ssl.ex_data(index)) else {
            return false;
        };
        let track = track.lock().unwrap_or_else(PoisonError::into_inner);
        let read = if ssl.is_server() {
            &track.client
        } else {
            &track.server
        };
        read.established && read.records > 0
    }
}

#[cfg(test)]
impl Track {
    /// Whether a KeyUpdate of the client (or the server) went by `ssl`.
    pub(super) fn updated(ssl: &SslRef, client: bool) -> bool {
        let track = ssl.ex_data(index().unwrap()).unwrap();
        let track = track.lock().unwrap();
        if client {
            track.client.updated
        } else {
            track.server.updated
        }
    }
}

/// Asks `builder`'s context to hand each session's application traffic
/// secrets to its [`Track`].
pub(super) fn log_secrets(builder: &mut SslContextBuilder) {
    builder.set_keylog_callback(|ssl, line| {
        let Some(track) = index().and_then(|index| ssl.ex_data(index)) else {
            return;
        };
        let mut track = track.lock().unwrap_or_else(PoisonError::into_inner);
        let mut fields = line.split(' ');
        let direction = match fields.next() {
            Some("CLIENT_TRAFFIC_SECRET_0") => &mut track.client,
            Some("SERVER_TRAFFIC_SECRET_0") => &mut track.server,
            _ => return,
        };
        // The client random, then the secret, in hex.
        if let Some(secret) = fields.nth(1).and_then(unhex) {
            direction.secret = Some(secret);
        }
    });
}

/// A secret written in hex, if it is one of at most [`SECRET_MAX`] bytes.
pub(super) fn unhex(text: &str) -> Option<([u8; SECRET_MAX], usize)> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(2) || text.len() > 2 * SECRET_MAX {
        return None;
    }
    let mut secret = [0; SECRET_MAX];
    for (byte, pair) in secret.iter_mut().zip(text.chunks_exact(2)) {
        let digit = |c: u8| (c as char).to_digit(16);
        *byte = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some((secret, text.len() / 2))
}

/// The ex-data slot of every session's [`Track`], made once a process.
fn index() -> Option<Index<Ssl, Mutex<Track>>> {
    static INDEX: OnceLock<Option<Index<Ssl, Mutex<Track>>>> = OnceLock::new();
    *INDEX.get_or_init(|| Ssl::new_ex_index().ok())
}

type MessageCallback = unsafe extern "C" fn(
    write_p: c_int,
    version: c_int,
    content_type: c_int,
    buf: *const c_void,
    len: usize,
    ssl: *mut openssl_sys::SSL,
    arg: *mut c_void,
);

extern "C" {
    /// libssl's (the openssl crate does not bind it): `cb` is called for
    /// every protocol message and record header the session reads or
    /// writes.
    fn SSL_set_msg_callback(ssl: *mut openssl_sys::SSL, cb: Option<MessageCallback>);
}

#[allow(unsafe_code)]
fn set_message_callback(ssl: &mut SslRef) {
    // SAFETY: `ssl.as_ptr()` is a live SSL (`ssl` borrows it mutably), and
    // `on_message` is a plain function that lives as long as the program.
    unsafe { SSL_set_msg_callback(ssl.as_ptr(), Some(on_message)) }
}

/// The message callback: counts record headers and notes Finished and
/// KeyUpdate messages, each in the direction it went.
#[allow(unsafe_code)]
unsafe extern "C" fn on_message(
    write_p: c_int,
    _version: c_int,
    content_type: c_int,
    buf: *const c_void,
    len: usize,
    ssl: *mut openssl_sys::SSL,
    _arg: *mut c_void,
) {
    if (content_type != RT_HEADER && content_type != RT_HANDSHAKE) || buf.is_null() || len == 0 {
        return;
    }
    // SAFETY: OpenSSL calls this with the session it is working on, live
    // for the call, and `buf` pointing at `len` readable bytes (checked
    // non-empty above); only the first is read, and nothing is kept.
    let (ssl, first) = unsafe { (SslRef::from_ptr(ssl), *buf.cast::<u8>()) };
    let Some(track) = index().and_then(|index| ssl.ex_data(index)) else {
        return;
    };
    let mut track = track.lock().unwrap_or_else(PoisonError::into_inner);
    let client_wrote = (write_p != 0) != ssl.is_server();
    let direction = if client_wrote {
        &mut track.client
    } else {
        &mut track.server
    };
    if content_type == RT_HEADER {
        direction.record();
    } else {
        direction.message(first);
    }
}

#[cfg(test)]
mod tests {
    use super::unhex;

    #[test]
    fn a_secret_in_hex_is_read_and_anything_else_is_not() {
        let (secret, len) = unhex("00ff10Ab").unwrap();
        assert_eq!(&secret[..len], [0x00, 0xff, 0x10, 0xab]);
        assert!(unhex("abc").is_none(), "odd length");
        assert!(unhex("zz").is_none(), "not hex");
        assert!(unhex(&"00".repeat(49)).is_none(), "longer than any secret");
    }
}
