//! The UDP packet of the AES methods (SIP022 3.2, SIP023):
//!
//! ```text
//! AES(first identity PSK or PSK, session id | packet id) | identity headers
//! | AEAD(session subkey, nonce = separate header[4..16], message header | payload)
//! ```
//!
//! A reply's separate header is sealed with the user's PSK, its body under
//! the server session's subkey.

use std::io;
use std::ops::Range;

use super::block::Block;
use super::identity::Identity;
use super::kdf::session_key;
use super::udp::{Known, UdpSession, REPLY_HEADER};
use super::{identity, Keys, Ss2022Error, BLOCK_LEN};
use crate::aead::{Nonce, SessionKey, TAG_LEN};

pub fn nonce_of(separate: &[u8; BLOCK_LEN]) -> Nonce {
    Nonce::new(separate[4..].try_into().expect("12 bytes"))
}

/// Seals a packet whose message header starts at `message` and whose tag
/// room ends `buf`; returns where the packet starts.
pub fn seal(
    keys: &Keys,
    key: &SessionKey,
    session_id: &[u8; 8],
    packet_id: u64,
    buf: &mut [u8],
    message: usize,
) -> io::Result<usize> {
    let block = keys.request_block().ok_or(Ss2022Error::KeyLength)?;
    seal_with(
        block,
        keys.identities(),
        key,
        session_id,
        packet_id,
        buf,
        message,
    )
}

/// [`seal`] with the separate header sealed by `block`, followed by the
/// identity headers of `identities` (none for a server's reply).
pub fn seal_with(
    block: &Block,
    identities: &[Identity],
    key: &SessionKey,
    session_id: &[u8; 8],
    packet_id: u64,
    buf: &mut [u8],
    message: usize,
) -> io::Result<usize> {
    let start = message - BLOCK_LEN * (1 + identities.len());
    let mut separate = [0; BLOCK_LEN];
    separate[..8].copy_from_slice(session_id);
    separate[8..].copy_from_slice(&packet_id.to_be_bytes());
    identity::write_udp(identities, &separate, &mut buf[start + BLOCK_LEN..message]);
    key.seal_in_place(&nonce_of(&separate), &[], &mut buf[message..])?;
    block.encrypt(&mut separate);
    buf[start..start + BLOCK_LEN].copy_from_slice(&separate);
    Ok(start)
}

/// Opens a reply in place: its server session, packet id and the range of
/// its message header and payload.
pub fn open(
    keys: &Keys,
    session: &mut UdpSession,
    buf: &mut [u8],
) -> io::Result<(Known, u64, Range<usize>)> {
    if buf.len() < BLOCK_LEN + REPLY_HEADER + TAG_LEN {
        return Err(Ss2022Error::Short.into());
    }
    let block = keys.reply_block().ok_or(Ss2022Error::KeyLength)?;
    let mut separate: [u8; BLOCK_LEN] = buf[..BLOCK_LEN].try_into().expect("16 bytes");
    block.decrypt(&mut separate);
    let server_id: [u8; 8] = separate[..8].try_into().expect("8 bytes");
    let packet_id = u64::from_be_bytes(separate[8..].try_into().expect("8 bytes"));
    let known = session.find(&server_id, packet_id, || {
        Ok(Some(session_key(keys.algorithm(), keys.psk(), &server_id)?))
    })?;
    let key = session.key_of(known).ok_or(Ss2022Error::KeyLength)?;
    let len = key.open_in_place(&nonce_of(&separate), &[], &mut buf[BLOCK_LEN..])?;
    Ok((known, packet_id, BLOCK_LEN..BLOCK_LEN + len))
}
