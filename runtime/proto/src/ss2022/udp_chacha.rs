//! The UDP packet of 2022-blake3-chacha20-poly1305 (SIP022 4.1):
//!
//! ```text
//! random nonce (24) | XChaCha20-Poly1305(PSK, session id | packet id | message header | payload)
//! ```

use std::io;
use std::ops::Range;

use chacha20poly1305::aead::AeadInOut;
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};

use super::udp::{Known, UdpSession, REPLY_HEADER};
use super::{random, Ss2022Error};
use crate::aead::{AeadError, TAG_LEN};

const NONCE_LEN: usize = 24;
const IDS: usize = 16;

/// Seals a packet whose message header starts at `message` and whose tag
/// room ends `buf`; returns where the packet starts.
pub fn seal(
    aead: &XChaCha20Poly1305,
    session_id: &[u8; 8],
    packet_id: u64,
    buf: &mut [u8],
    message: usize,
) -> io::Result<usize> {
    let start = message - IDS - NONCE_LEN;
    let ids = start + NONCE_LEN;
    random::fill(&mut buf[start..ids])?;
    buf[ids..ids + 8].copy_from_slice(session_id);
    buf[ids + 8..message].copy_from_slice(&packet_id.to_be_bytes());
    let (head, body) = buf.split_at_mut(ids);
    let nonce = XNonce::try_from(&head[start..]).map_err(|_| AeadError::Cipher)?;
    let data_len = body.len() - TAG_LEN;
    let (data, tag) = body.split_at_mut(data_len);
    let sealed = aead
        .encrypt_inout_detached(&nonce, &[], data.into())
        .map_err(|_| AeadError::Cipher)?;
    tag.copy_from_slice(&sealed);
    Ok(start)
}

/// Opens a reply in place: its server session, packet id and the range of
/// its message header and payload.
pub fn open(
    aead: &XChaCha20Poly1305,
    session: &mut UdpSession,
    buf: &mut [u8],
) -> io::Result<(Known, u64, Range<usize>)> {
    let (server_id, packet_id, message) = open_in_place(aead, buf, REPLY_HEADER)?;
    let known = session.find(&server_id, packet_id, || Ok(None))?;
    Ok((known, packet_id, message))
}

/// Opens a packet whose message header is at least `header` bytes, in
/// place: its session id, packet id, and the range of its message header
/// and payload.
pub fn open_in_place(
    aead: &XChaCha20Poly1305,
    buf: &mut [u8],
    header: usize,
) -> io::Result<([u8; 8], u64, Range<usize>)> {
    if buf.len() < NONCE_LEN + IDS + header + TAG_LEN {
        return Err(Ss2022Error::Short.into());
    }
    let end = buf.len() - TAG_LEN;
    let (head, rest) = buf.split_at_mut(NONCE_LEN);
    let nonce = XNonce::try_from(&*head).map_err(|_| AeadError::Cipher)?;
    let (data, tag) = rest.split_at_mut(end - NONCE_LEN);
    let tag = Tag::try_from(&*tag).map_err(|_| AeadError::Cipher)?;
    aead.decrypt_inout_detached(&nonce, &[], data.into(), &tag)
        .map_err(|_| AeadError::Unauthentic)?;
    let session_id: [u8; 8] = data[..8].try_into().expect("8 bytes");
    let packet_id = u64::from_be_bytes(data[8..IDS].try_into().expect("8 bytes"));
    Ok((session_id, packet_id, NONCE_LEN + IDS..end))
}
