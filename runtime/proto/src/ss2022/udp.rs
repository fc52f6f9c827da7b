//! A Shadowsocks 2022 UDP session, client side (SIP022 3.2 and 4.1): one
//! client session id, a packet id counting from zero, and the server
//! sessions it hears from, each with its own replay window.
//!
//! Both forms share the message header after the session and packet ids:
//!
//! ```text
//! ours:    type 0 | timestamp | padding length | padding | address | payload
//! replies: type 1 | timestamp | client session id | padding length | padding | address | payload
//! ```
//!
//! The AES methods put the ids in an AES-sealed separate header
//! ([`udp_aes`](super::udp_aes)); 2022-blake3-chacha20-poly1305 seals them
//! with the rest under the PSK ([`udp_chacha`](super::udp_chacha)).

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::replay::Window;
use super::{address, random, timestamp_fresh, udp_aes, udp_chacha, unix_secs, Keys, Ss2022Error};
use super::{BLOCK_LEN, MAX_IDENTITIES};
use crate::aead::{SessionKey, TAG_LEN};
use crate::Address;

pub(super) const CLIENT_PACKET: u8 = 0;
pub(super) const SERVER_PACKET: u8 = 1;
/// Type, timestamp and padding length.
pub(super) const MESSAGE_HEADER: usize = 1 + 8 + 2;
/// A reply's: type, timestamp, client session id, padding length.
pub(super) const REPLY_HEADER: usize = 1 + 8 + 8 + 2;
/// How long a previous server session keeps a newer one out.
const SESSION_OVERLAP: Duration = Duration::from_secs(60);

/// A server session the client heard from.
pub(super) struct ServerSession {
    pub id: [u8; 8],
    /// AES methods: the AEAD key of the server's session.
    pub key: Option<SessionKey>,
    window: Window,
    last_seen: SystemTime,
}

impl ServerSession {
    pub fn new(id: [u8; 8], key: Option<SessionKey>) -> ServerSession {
        ServerSession {
            id,
            key,
            window: Window::default(),
            last_seen: SystemTime::UNIX_EPOCH,
        }
    }
}

/// Which server session a reply belongs to, found before it is trusted.
#[derive(Clone, Copy)]
pub(super) enum Known {
    Current,
    Previous,
    /// The candidate: a session not heard from before.
    New,
}

pub struct UdpSession {
    keys: Arc<Keys>,
    id: [u8; 8],
    next_packet: u64,
    /// AES methods: the AEAD key of our session.
    send: Option<SessionKey>,
    current: Option<ServerSession>,
    previous: Option<ServerSession>,
    /// A new server session's state while its first reply is checked,
    /// kept in place so no reply allocates.
    candidate: Option<ServerSession>,
}

impl UdpSession {
    /// The most a packet puts before its payload: an AES separate header,
    /// 16 identity headers, the message header, the longest address.
    pub const HEADROOM: usize =
        BLOCK_LEN + BLOCK_LEN * MAX_IDENTITIES + MESSAGE_HEADER + address::MAX_LEN;
    pub const TAILROOM: usize = TAG_LEN;

    /// A new session under a random session id.
    pub fn new(keys: Arc<Keys>) -> io::Result<UdpSession> {
        let mut id = [0; 8];
        random::fill(&mut id)?;
        Self::with_id(keys, id)
    }

    fn with_id(keys: Arc<Keys>, id: [u8; 8]) -> io::Result<UdpSession> {
        let send = match keys.xchacha() {
            Some(_) => None,
            None => Some(super::kdf::session_key(keys.algorithm(), keys.psk(), &id)?),
        };
        Ok(UdpSession {
            keys,
            id,
            next_packet: 0,
            send,
            current: None,
            previous: None,
            candidate: None,
        })
    }

    /// Seals the `len` payload bytes at `buf[HEADROOM..HEADROOM + len]`,
    /// bound for `to` and stamped with `now`, where they lie; returns the
    /// range of `buf` the packet occupies.
    pub fn seal_to(
        &mut self,
        buf: &mut [u8],
        len: usize,
        to: &Address,
        now: SystemTime,
    ) -> io::Result<Range<usize>> {
        let end = Self::HEADROOM + len + TAG_LEN;
        if buf.len() < end {
            return Err(Ss2022Error::PayloadTooLong.into());
        }
        let addr_len = address::encoded_len(to);
        let message = Self::HEADROOM - addr_len - MESSAGE_HEADER;
        buf[message] = CLIENT_PACKET;
        buf[message + 1..message + 9].copy_from_slice(&unix_secs(now).to_be_bytes());
        buf[message + 9..message + 11].copy_from_slice(&0u16.to_be_bytes());
        address::write(to, &mut buf[message + MESSAGE_HEADER..]);
        let packet_id = self.next_packet;
        self.next_packet = self.next_packet.wrapping_add(1);
        let start = match (self.keys.xchacha(), &self.send) {
            (Some(aead), _) => {
                udp_chacha::seal(aead, &self.id, packet_id, &mut buf[..end], message)?
            }
            (None, Some(key)) => udp_aes::seal(
                &self.keys,
                key,
                &self.id,
                packet_id,
                &mut buf[..end],
                message,
            )?,
            (None, None) => {
                return Err(io::Error::other(
                    "shadowsocks-2022: a session without a key",
                ))
            }
        };
        Ok(start..end)
    }

    /// Opens the reply at the start of `buf`, which arrived by `now`, in
    /// place: the peer its header names and where its payload lies. A reply
    /// that does not authenticate, or fails a check, changes nothing.
    pub fn open_from(
        &mut self,
        buf: &mut [u8],
        now: SystemTime,
    ) -> io::Result<(Address, Range<usize>)> {
        let keys = self.keys.clone();
        let opened = match keys.xchacha() {
            Some(aead) => udp_chacha::open(aead, self, buf)?,
            None => udp_aes::open(&keys, self, buf)?,
        };
        let (known, packet_id, body) = opened;
        let message = &buf[body.clone()];
        if message[0] != SERVER_PACKET {
            return Err(Ss2022Error::NotServer.into());
        }
        let timestamp = u64::from_be_bytes(message[1..9].try_into().expect("8 bytes"));
        if !timestamp_fresh(timestamp, now) {
            return Err(Ss2022Error::Timestamp.into());
        }
        if message[9..17] != self.id {
            return Err(Ss2022Error::OtherSession.into());
        }
        let padding = usize::from(u16::from_be_bytes([message[17], message[18]]));
        let at = REPLY_HEADER + padding;
        let (peer, used) = address::read(message.get(at..).ok_or(Ss2022Error::Short)?)?;
        self.commit(known, packet_id, now)?;
        Ok((peer, body.start + at + used..body.end))
    }

    /// The server session a reply names, and whether its packet id is new.
    pub(super) fn find(
        &mut self,
        server_id: &[u8; 8],
        packet_id: u64,
        key: impl FnOnce() -> io::Result<Option<SessionKey>>,
    ) -> io::Result<Known> {
        let (known, window) = match (&self.current, &self.previous) {
            (Some(current), _) if current.id == *server_id => (Known::Current, &current.window),
            (_, Some(previous)) if previous.id == *server_id => (Known::Previous, &previous.window),
            _ => {
                self.candidate = Some(ServerSession::new(*server_id, key()?));
                return Ok(Known::New);
            }
        };
        if !window.admits(packet_id) {
            return Err(Ss2022Error::Replayed.into());
        }
        Ok(known)
    }

    /// The key of a known server session.
    pub(super) fn key_of(&self, known: Known) -> Option<&SessionKey> {
        match known {
            Known::Current => self.current.as_ref()?.key.as_ref(),
            Known::Previous => self.previous.as_ref()?.key.as_ref(),
            Known::New => self.candidate.as_ref()?.key.as_ref(),
        }
    }

    /// Records a reply that passed every check. A new server session
    /// (the server restarted) becomes current, unless the one before the
    /// current was heard from within the last minute.
    fn commit(&mut self, known: Known, packet_id: u64, now: SystemTime) -> io::Result<()> {
        let session = match known {
            Known::Current => self.current.as_mut(),
            Known::Previous => self.previous.as_mut(),
            Known::New => {
                if let Some(previous) = &self.previous {
                    let quiet = now.duration_since(previous.last_seen).unwrap_or_default();
                    if quiet < SESSION_OVERLAP {
                        return Err(Ss2022Error::SessionChurn.into());
                    }
                }
                if let Some(session) = self.candidate.take() {
                    self.previous = self.current.replace(session);
                }
                self.current.as_mut()
            }
        };
        if let Some(session) = session {
            session.window.record(packet_id);
            session.last_seen = now;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ss2022::block::Block;
    use crate::ss2022::identity::tests::{hash16, peel_udp};
    use crate::ss2022::kdf::{session_key, Key};
    use crate::ss2022::tests::{psk, t0, METHODS};
    use chacha20poly1305::aead::AeadInOut;
    use chacha20poly1305::{KeyInit, XChaCha20Poly1305, XNonce};
    use etemenanki_ir::spec::Ss2022Method;

    fn dns() -> Address {
        Address::Ip("192.0.2.53:53".parse().unwrap())
    }

    fn session(method: Ss2022Method, ipsks: &[&[u8]]) -> UdpSession {
        let keys = Keys::new(method, &psk(method, 7), ipsks).unwrap();
        UdpSession::with_id(Arc::new(keys), *b"clientid").unwrap()
    }

    fn seal(session: &mut UdpSession, payload: &[u8], now: SystemTime) -> Vec<u8> {
        let mut buf = vec![0; UdpSession::HEADROOM + payload.len() + TAG_LEN];
        buf[UdpSession::HEADROOM..UdpSession::HEADROOM + payload.len()].copy_from_slice(payload);
        let range = session
            .seal_to(&mut buf, payload.len(), &dns(), now)
            .unwrap();
        buf[range].to_vec()
    }

    struct Found {
        session_id: [u8; 8],
        packet_id: u64,
        timestamp: u64,
        to: Address,
        payload: Vec<u8>,
    }

    /// What a server from the same primitives finds in one of our packets:
    /// session id, packet id, timestamp, destination and payload.
    fn server_open(
        method: Ss2022Method,
        user: &[u8],
        ipsks: &[&[u8]],
        packet: &[u8],
    ) -> Option<Found> {
        let mut packet = packet.to_vec();
        let body_at = if method == Ss2022Method::Blake3Chacha20Poly1305 {
            let aead = XChaCha20Poly1305::new_from_slice(user).unwrap();
            let nonce = XNonce::try_from(&packet[..24]).unwrap();
            let data_len = packet.len() - 24 - 16;
            let (data, tag) = packet[24..].split_at_mut(data_len);
            let tag = chacha20poly1305::Tag::try_from(&*tag).unwrap();
            aead.decrypt_inout_detached(&nonce, &[], data.into(), &tag)
                .ok()?;
            24
        } else {
            let first = ipsks.first().copied().unwrap_or(user);
            let mut separate: [u8; 16] = packet[..16].try_into().unwrap();
            Block::new(first).unwrap().decrypt(&mut separate);
            let mut at = 16;
            for (i, ipsk) in ipsks.iter().enumerate() {
                let next = ipsks.get(i + 1).copied().unwrap_or(user);
                if peel_udp(ipsk, &separate, &packet[at..at + 16]) != hash16(next) {
                    return None;
                }
                at += 16;
            }
            let key = session_key(
                Keys::new(method, user, &[]).unwrap().algorithm(),
                &Key::for_test(user),
                &separate[..8],
            )
            .unwrap();
            let nonce = crate::aead::Nonce::new(separate[4..16].try_into().unwrap());
            key.open_in_place(&nonce, &[], &mut packet[at..]).ok()?;
            packet[..16].copy_from_slice(&separate);
            packet.copy_within(at.., 16);
            packet.truncate(packet.len() - (at - 16));
            0
        };
        let ids = &packet[body_at..body_at + 16];
        let message = &packet[body_at + 16..packet.len() - 16];
        assert_eq!(message[0], CLIENT_PACKET);
        let timestamp = u64::from_be_bytes(message[1..9].try_into().unwrap());
        let padding = usize::from(u16::from_be_bytes([message[9], message[10]]));
        let (to, used) = address::read(&message[11 + padding..]).unwrap();
        Some(Found {
            session_id: ids[..8].try_into().unwrap(),
            packet_id: u64::from_be_bytes(ids[8..16].try_into().unwrap()),
            timestamp,
            to,
            payload: message[11 + padding + used..].to_vec(),
        })
    }

    /// A reply of server session `server_id`, packet `packet_id`, from `from`.
    fn reply(
        method: Ss2022Method,
        user: &[u8],
        server_id: [u8; 8],
        packet_id: u64,
        client_id: [u8; 8],
        timestamp: u64,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut message = vec![SERVER_PACKET];
        message.extend_from_slice(&timestamp.to_be_bytes());
        message.extend_from_slice(&client_id);
        message.extend_from_slice(&2u16.to_be_bytes());
        message.extend_from_slice(&[0xee, 0xee]);
        let mut addr = [0; address::MAX_LEN];
        let n = address::write(&dns(), &mut addr);
        message.extend_from_slice(&addr[..n]);
        message.extend_from_slice(payload);
        let mut ids = server_id.to_vec();
        ids.extend_from_slice(&packet_id.to_be_bytes());
        if method == Ss2022Method::Blake3Chacha20Poly1305 {
            let aead = XChaCha20Poly1305::new_from_slice(user).unwrap();
            let nonce = [0x42; 24];
            let mut body = ids;
            body.extend_from_slice(&message);
            let tag = aead
                .encrypt_inout_detached(&XNonce::from(nonce), &[], body.as_mut_slice().into())
                .unwrap();
            let mut packet = nonce.to_vec();
            packet.extend_from_slice(&body);
            packet.extend_from_slice(&tag);
            packet
        } else {
            let algorithm = Keys::new(method, user, &[]).unwrap().algorithm();
            let key = session_key(algorithm, &Key::for_test(user), &server_id).unwrap();
            let nonce = crate::aead::Nonce::new(ids[4..16].try_into().unwrap());
            message.extend_from_slice(&[0; 16]);
            key.seal_in_place(&nonce, &[], &mut message).unwrap();
            let mut separate: [u8; 16] = ids.try_into().unwrap();
            Block::new(user).unwrap().encrypt(&mut separate);
            let mut packet = separate.to_vec();
            packet.extend_from_slice(&message);
            packet
        }
    }

    fn open(session: &mut UdpSession, packet: &[u8], now: SystemTime) -> io::Result<Vec<u8>> {
        let mut buf = packet.to_vec();
        let (peer, range) = session.open_from(&mut buf, now)?;
        assert_eq!(peer, dns());
        Ok(buf[range].to_vec())
    }

    #[test]
    fn our_packets_open_at_a_server_and_its_replies_open_here() {
        for method in METHODS {
            let mut s = session(method, &[]);
            for (n, payload) in [&b"query"[..], b"", &[0x5a; 1400][..]].iter().enumerate() {
                let packet = seal(&mut s, payload, t0());
                let found = server_open(method, &psk(method, 7), &[], &packet).unwrap();
                assert_eq!(
                    (found.session_id, found.packet_id, found.timestamp),
                    (*b"clientid", n as u64, 1_750_000_000)
                );
                assert_eq!(found.to, dns());
                assert_eq!(&found.payload, payload);
            }
            let answer = reply(
                method,
                &psk(method, 7),
                *b"server01",
                0,
                *b"clientid",
                1_750_000_010,
                b"answer",
            );
            assert_eq!(
                open(&mut s, &answer, t0()).unwrap(),
                b"answer",
                "{method:?}"
            );
        }
    }

    #[test]
    fn a_replayed_or_stale_reply_is_refused_and_a_late_one_accepted() {
        for method in METHODS {
            let user = psk(method, 7);
            let mut s = session(method, &[]);
            let r =
                |id: u64, ts: u64| reply(method, &user, *b"server01", id, *b"clientid", ts, b"x");
            assert!(open(&mut s, &r(5, 1_750_000_000), t0()).is_ok());
            let e = open(&mut s, &r(5, 1_750_000_000), t0()).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::Replayed.message());
            assert!(
                open(&mut s, &r(3, 1_750_000_000), t0()).is_ok(),
                "late but in the window"
            );
            let e = open(&mut s, &r(6, 1_750_000_031), t0()).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::Timestamp.message());
            // The stale packet did not move the window: 6 is still new.
            assert!(open(&mut s, &r(6, 1_749_999_970), t0()).is_ok());
        }
    }

    #[test]
    fn a_wrong_psk_or_another_sessions_reply_is_refused() {
        for method in METHODS {
            let mut s = session(method, &[]);
            let packet = seal(&mut s, b"q", t0());
            assert!(server_open(method, &psk(method, 8), &[], &packet).is_none());
            let wrong = reply(
                method,
                &psk(method, 8),
                *b"server01",
                0,
                *b"clientid",
                1_750_000_000,
                b"x",
            );
            assert_eq!(
                open(&mut s, &wrong, t0()).unwrap_err().kind(),
                io::ErrorKind::InvalidData
            );
            let other = reply(
                method,
                &psk(method, 7),
                *b"server01",
                0,
                *b"someoneX",
                1_750_000_000,
                b"x",
            );
            let e = open(&mut s, &other, t0()).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::OtherSession.message());
            // Neither changed the session: the genuine packet 0 still opens.
            let good = reply(
                method,
                &psk(method, 7),
                *b"server01",
                0,
                *b"clientid",
                1_750_000_000,
                b"x",
            );
            assert!(open(&mut s, &good, t0()).is_ok());
        }
    }

    #[test]
    fn a_restarted_server_is_followed_but_not_a_third_session_within_a_minute() {
        let method = Ss2022Method::Blake3Aes128Gcm;
        let user = psk(method, 7);
        let mut s = session(method, &[]);
        let r = |server: &[u8; 8], id: u64, ts: u64| {
            reply(
                method,
                &user,
                *server,
                id,
                *b"clientid",
                1_750_000_000 + ts,
                b"x",
            )
        };
        let at = |secs: u64| t0() + Duration::from_secs(secs);
        assert!(open(&mut s, &r(b"server01", 0, 0), at(0)).is_ok());
        assert!(open(&mut s, &r(b"server02", 0, 0), at(0)).is_ok());
        // The old session's late packets still count.
        assert!(open(&mut s, &r(b"server01", 1, 0), at(0)).is_ok());
        let e = open(&mut s, &r(b"server03", 0, 10), at(10)).unwrap_err();
        assert_eq!(e.to_string(), Ss2022Error::SessionChurn.message());
        // A minute after the old session's last packet, a third one may start.
        assert!(open(&mut s, &r(b"server03", 0, 61), at(61)).is_ok_and(|p| p == b"x"));
    }

    #[test]
    fn identity_headers_name_the_user_of_a_multi_user_server() {
        for method in [Ss2022Method::Blake3Aes128Gcm, Ss2022Method::Blake3Aes256Gcm] {
            let server_identity = psk(method, 0x10);
            let mut s = session(method, &[&server_identity]);
            let packet = seal(&mut s, b"q", t0());
            let found = server_open(method, &psk(method, 7), &[&server_identity], &packet).unwrap();
            assert_eq!(found.payload, b"q");
            // Another user's key does not open it.
            assert!(server_open(method, &psk(method, 9), &[&server_identity], &packet).is_none());
            // The server answers under the user's PSK.
            let answer = reply(
                method,
                &psk(method, 7),
                *b"server01",
                0,
                *b"clientid",
                1_750_000_000,
                b"a",
            );
            assert_eq!(open(&mut s, &answer, t0()).unwrap(), b"a");
        }
    }

    #[test]
    fn a_packet_that_cannot_hold_its_headers_is_refused_without_a_panic() {
        for method in METHODS {
            let mut s = session(method, &[]);
            for len in [0, 1, 16, 40, 60, 80] {
                let mut junk: Vec<u8> = (0..len as u8).collect();
                assert!(s.open_from(&mut junk, t0()).is_err());
            }
            let mut small = vec![0; UdpSession::HEADROOM + 4];
            assert_eq!(
                s.seal_to(&mut small, 4, &dns(), t0()).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }
}
