//! Shadowsocks 2022 UDP, server side (SIP022 3.2 and 4.1, SIP023): one
//! socket all clients share, a session per client session id.
//!
//! For each datagram the runtime:
//! 1. opens its head, [`UdpHead::open`]: the AES separate header (and, on a
//!    multi-user inbound, the identity header that names the user), or, for
//!    2022-blake3-chacha20-poly1305, the whole packet under the PSK;
//! 2. finds the [`UdpClientSession`] it keeps under
//!    [`UdpHead::session_id`], or builds one with [`UdpClientSession::new`]
//!    (kept only once a packet opened under it);
//! 3. opens the packet with [`UdpClientSession::open`], which checks the
//!    user, the packet id against the session's sliding window, the type
//!    and the timestamp, and only then records the packet id.
//!
//! Replies go out through [`UdpClientSession::seal_reply`], under the
//! server session id the state drew and its own packet counter, naming the
//! client's session id. Per client session the runtime keeps the
//! [`UdpClientSession`] (its keys, replay window and reply counter), the
//! address the client last sent an authenticated packet from (where replies
//! go), the time of that packet (to expire the session), and its outbound
//! association. Keep an idle session at least 60 s: a packet replayed
//! after its session is forgotten opens a new one, and only the 30 s
//! timestamp window refuses it then. Nothing here allocates per packet,
//! except a domain name in a destination, as every datagram codec's
//! [`Address`] does.

use std::io;
use std::ops::Range;
use std::time::SystemTime;

use super::kdf::session_key;
use super::replay::Window;
use super::udp::{CLIENT_PACKET, MESSAGE_HEADER, REPLY_HEADER, SERVER_PACKET};
use super::users::{UserId, Users};
use super::{
    address, random, timestamp_fresh, udp_aes, udp_chacha, unix_secs, Ss2022Error, BLOCK_LEN,
};
use crate::aead::{SessionKey, TAG_LEN};
use crate::codec::Packet;
use crate::Address;

/// The most a reply puts before its payload: the XChaCha20 nonce (24) and
/// ids (16), the reply header, the longest address. The AES form's
/// separate header needs less.
pub const UDP_HEADROOM: usize = 24 + 16 + REPLY_HEADER + address::MAX_LEN;
/// What a reply puts after its payload: the tag.
pub const UDP_TAILROOM: usize = TAG_LEN;

/// The head of a client packet, opened before its session is looked up.
#[derive(Clone, Debug)]
pub struct UdpHead {
    /// Session id and packet id, in the clear.
    separate: [u8; BLOCK_LEN],
    user: UserId,
    /// The message header and payload, sealed or (XChaCha20) opened.
    body: Range<usize>,
    opened: bool,
}

impl UdpHead {
    /// Opens the head of the client packet that is the whole of `buf`, in
    /// place. A packet too short for its headers, one whose identity header
    /// names no user, or (XChaCha20) one that does not authenticate is an
    /// error, for the runtime to drop.
    pub fn open(users: &Users, buf: &mut [u8]) -> io::Result<UdpHead> {
        if let Some(aead) = users.xchacha() {
            let (session_id, packet_id, body) =
                udp_chacha::open_in_place(aead, buf, MESSAGE_HEADER)?;
            let mut separate = [0; BLOCK_LEN];
            separate[..8].copy_from_slice(&session_id);
            separate[8..].copy_from_slice(&packet_id.to_be_bytes());
            return Ok(UdpHead {
                separate,
                user: None,
                body,
                opened: true,
            });
        }
        let block = users.block().ok_or(Ss2022Error::KeyLength)?;
        let identity = if users.multi_user() { BLOCK_LEN } else { 0 };
        let sealed = BLOCK_LEN + identity;
        if buf.len() < sealed + MESSAGE_HEADER + TAG_LEN {
            return Err(Ss2022Error::Short.into());
        }
        let mut separate = [0; BLOCK_LEN];
        separate.copy_from_slice(&buf[..BLOCK_LEN]);
        block.decrypt(&mut separate);
        let user = if users.multi_user() {
            let mut name = [0; BLOCK_LEN];
            name.copy_from_slice(&buf[BLOCK_LEN..sealed]);
            block.decrypt(&mut name);
            for (byte, mask) in name.iter_mut().zip(&separate) {
                *byte ^= mask;
            }
            Some(users.find(&name).ok_or(Ss2022Error::UnknownUser)?)
        } else {
            None
        };
        Ok(UdpHead {
            separate,
            user,
            body: sealed..buf.len(),
            opened: false,
        })
    }

    /// The client's session id: what the runtime keys its sessions by.
    pub fn session_id(&self) -> [u8; 8] {
        let mut id = [0; 8];
        id.copy_from_slice(&self.separate[..8]);
        id
    }

    pub fn packet_id(&self) -> u64 {
        let mut id = [0; 8];
        id.copy_from_slice(&self.separate[8..]);
        u64::from_be_bytes(id)
    }

    /// The user the identity header named; None on a single-user inbound.
    pub fn user(&self) -> UserId {
        self.user
    }
}

/// What the server keeps for one client session.
pub struct UdpClientSession {
    user: UserId,
    client_id: [u8; 8],
    /// AES methods: the key of the client's session.
    recv: Option<SessionKey>,
    window: Window,
    server_id: [u8; 8],
    /// AES methods: the key of our session toward this client.
    send: Option<SessionKey>,
    next_packet: u64,
}

impl UdpClientSession {
    /// The state of the session `head` names, with a fresh random server
    /// session id; the runtime keeps it once a packet opened under it.
    pub fn new(users: &Users, head: &UdpHead) -> io::Result<UdpClientSession> {
        let mut server_id = [0; 8];
        random::fill(&mut server_id)?;
        let client_id = head.session_id();
        let (recv, send) = match users.xchacha() {
            Some(_) => (None, None),
            None => {
                let psk = users.psk_of(head.user).ok_or(Ss2022Error::UnknownUser)?;
                (
                    Some(session_key(users.algorithm(), psk, &client_id)?),
                    Some(session_key(users.algorithm(), psk, &server_id)?),
                )
            }
        };
        Ok(UdpClientSession {
            user: head.user,
            client_id,
            recv,
            window: Window::default(),
            server_id,
            send,
            next_packet: 0,
        })
    }

    /// The user the session belongs to.
    pub fn user(&self) -> UserId {
        self.user
    }

    /// Opens the rest of the packet whose head is `head`, in `buf` where it
    /// lies, which arrived by `now`: its destination (`peer`) and payload.
    /// A packet of another session or user, a packet id seen before or
    /// behind the window, one that does not authenticate, not of the client
    /// type, more than 30 s off `now`, or whose address does not parse is
    /// an error and changes nothing.
    pub fn open(&mut self, head: &UdpHead, buf: &mut [u8], now: SystemTime) -> io::Result<Packet> {
        if head.session_id() != self.client_id || head.user != self.user {
            return Err(Ss2022Error::SessionMismatch.into());
        }
        let packet_id = head.packet_id();
        if !self.window.admits(packet_id) {
            return Err(Ss2022Error::Replayed.into());
        }
        let mut body = head.body.clone();
        if !head.opened {
            let key = self.recv.as_ref().ok_or(Ss2022Error::KeyLength)?;
            let sealed = buf.get_mut(body.clone()).ok_or(Ss2022Error::Short)?;
            let len = key.open_in_place(&udp_aes::nonce_of(&head.separate), &[], sealed)?;
            body.end = body.start + len;
        }
        let message = buf.get(body.clone()).ok_or(Ss2022Error::Short)?;
        if message.len() < MESSAGE_HEADER {
            return Err(Ss2022Error::Short.into());
        }
        if message[0] != CLIENT_PACKET {
            return Err(Ss2022Error::NotClient.into());
        }
        let mut timestamp = [0; 8];
        timestamp.copy_from_slice(&message[1..9]);
        if !timestamp_fresh(u64::from_be_bytes(timestamp), now) {
            return Err(Ss2022Error::ClientTimestamp.into());
        }
        let padding = usize::from(u16::from_be_bytes([message[9], message[10]]));
        let at = MESSAGE_HEADER + padding;
        let rest = message.get(at..).ok_or(Ss2022Error::Short)?;
        let (peer, used) = address::read(rest).map_err(|error| match error {
            Ss2022Error::Short => Ss2022Error::Short,
            _ => Ss2022Error::RequestAddress,
        })?;
        self.window.record(packet_id);
        Ok(Packet {
            consumed: buf.len(),
            peer,
            payload: body.start + at + used..body.end,
        })
    }

    /// Seals the `len` reply bytes at `buf[UDP_HEADROOM..UDP_HEADROOM +
    /// len]` from `source`, stamped with `now`, where they lie (UDP_TAILROOM
    /// bytes follow them); returns the range of `buf` the packet occupies.
    pub fn seal_reply(
        &mut self,
        users: &Users,
        buf: &mut [u8],
        len: usize,
        source: &Address,
        now: SystemTime,
    ) -> io::Result<Range<usize>> {
        let end = UDP_HEADROOM + len + TAG_LEN;
        if buf.len() < end {
            return Err(Ss2022Error::BufferTooSmall.into());
        }
        let message = UDP_HEADROOM - address::encoded_len(source) - REPLY_HEADER;
        let header = &mut buf[message..message + REPLY_HEADER];
        header[0] = SERVER_PACKET;
        header[1..9].copy_from_slice(&unix_secs(now).to_be_bytes());
        header[9..17].copy_from_slice(&self.client_id);
        header[17..19].copy_from_slice(&0u16.to_be_bytes());
        address::write(source, &mut buf[message + REPLY_HEADER..]);
        let packet_id = self.next_packet;
        self.next_packet = self.next_packet.wrapping_add(1);
        let start = match (users.xchacha(), &self.send) {
            (Some(aead), _) => {
                udp_chacha::seal(aead, &self.server_id, packet_id, &mut buf[..end], message)?
            }
            (None, Some(key)) => udp_aes::seal_with(
                users
                    .reply_block(self.user)
                    .ok_or(Ss2022Error::UnknownUser)?,
                &[],
                key,
                &self.server_id,
                packet_id,
                &mut buf[..end],
                message,
            )?,
            (None, None) => return Err(Ss2022Error::KeyLength.into()),
        };
        Ok(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ss2022::tests::{psk, t0, METHODS};
    use crate::ss2022::{Keys, UdpSession};
    use etemenanki_ir::spec::Ss2022Method;
    use std::sync::Arc;
    use std::time::Duration;

    fn dns() -> Address {
        Address::Domain("dns.example".into(), 53)
    }

    /// Single-user under PSK 7, or server PSK 1 with users 7 and 8.
    fn users(method: Ss2022Method, multi: bool) -> Users {
        let users = if multi {
            Users::new(
                method,
                &psk(method, 1),
                &[&psk(method, 7), &psk(method, 8)],
                t0,
            )
        } else {
            Users::new(method, &psk(method, 7), &[], t0)
        };
        users.unwrap()
    }

    fn client(method: Ss2022Method, user: u8, server: Option<u8>) -> UdpSession {
        let identity = server.map(|byte| psk(method, byte));
        let identities: Vec<&[u8]> = identity.iter().map(|k| k.as_slice()).collect();
        let keys = Keys::new(method, &psk(method, user), &identities).unwrap();
        UdpSession::new(Arc::new(keys)).unwrap()
    }

    fn seal(client: &mut UdpSession, payload: &[u8], now: SystemTime) -> Vec<u8> {
        let head = UdpSession::HEADROOM;
        let mut buf = vec![0; head + payload.len() + TAG_LEN];
        buf[head..head + payload.len()].copy_from_slice(payload);
        let range = client
            .seal_to(&mut buf, payload.len(), &dns(), now)
            .unwrap();
        buf[range].to_vec()
    }

    /// Opens `packet` as the runtime would, under `sessions`' state for its
    /// session id or a new one; returns the payload.
    fn serve(
        users: &Users,
        sessions: &mut Vec<UdpClientSession>,
        packet: &[u8],
        now: SystemTime,
    ) -> io::Result<Vec<u8>> {
        let mut buf = packet.to_vec();
        let head = UdpHead::open(users, &mut buf)?;
        let found = sessions
            .iter_mut()
            .position(|s| s.client_id == head.session_id());
        let packet = match found {
            Some(at) => sessions[at].open(&head, &mut buf, now)?,
            None => {
                let mut session = UdpClientSession::new(users, &head)?;
                let packet = session.open(&head, &mut buf, now)?;
                sessions.push(session);
                packet
            }
        };
        assert_eq!(packet.peer, dns());
        assert_eq!(packet.consumed, buf.len());
        Ok(buf[packet.payload].to_vec())
    }

    fn reply(session: &mut UdpClientSession, users: &Users, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0; UDP_HEADROOM + payload.len() + UDP_TAILROOM];
        buf[UDP_HEADROOM..UDP_HEADROOM + payload.len()].copy_from_slice(payload);
        let range = session
            .seal_reply(users, &mut buf, payload.len(), &dns(), t0())
            .unwrap();
        buf[range].to_vec()
    }

    fn client_opens(client: &mut UdpSession, packet: &[u8]) -> io::Result<Vec<u8>> {
        let mut buf = packet.to_vec();
        let (peer, range) = client.open_from(&mut buf, t0())?;
        assert_eq!(peer, dns());
        Ok(buf[range].to_vec())
    }

    #[test]
    fn our_client_opens_at_the_server_and_the_replies_at_the_client() {
        for method in METHODS {
            let users = users(method, false);
            let mut sessions = Vec::new();
            let mut client = client(method, 7, None);
            for payload in [&b"query"[..], b"", &[0xa5; 1400]] {
                let packet = seal(&mut client, payload, t0());
                assert_eq!(
                    serve(&users, &mut sessions, &packet, t0()).unwrap(),
                    payload
                );
            }
            assert_eq!(sessions.len(), 1, "one client session");
            let session = &mut sessions[0];
            assert_eq!(session.user(), None);
            for answer in [&b"answer"[..], b"second", b""] {
                let packet = reply(session, &users, answer);
                assert_eq!(
                    client_opens(&mut client, &packet).unwrap(),
                    answer,
                    "{method:?}"
                );
            }
            // The client checks our packet ids: a replayed reply is refused.
            let packet = reply(session, &users, b"x");
            assert!(client_opens(&mut client, &packet).is_ok());
            let e = client_opens(&mut client, &packet).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::Replayed.message());
        }
    }

    #[test]
    fn each_user_of_a_multi_user_inbound_is_identified_and_a_stranger_refused() {
        for method in [Ss2022Method::Blake3Aes128Gcm, Ss2022Method::Blake3Aes256Gcm] {
            let users = users(method, true);
            let mut sessions = Vec::new();
            for (byte, index) in [(7, 0), (8, 1)] {
                let mut client = client(method, byte, Some(1));
                let packet = seal(&mut client, b"q", t0());
                let mut buf = packet.clone();
                assert_eq!(UdpHead::open(&users, &mut buf).unwrap().user(), Some(index));
                assert_eq!(serve(&users, &mut sessions, &packet, t0()).unwrap(), b"q");
                let session = sessions.last_mut().unwrap();
                assert_eq!(session.user(), Some(index));
                let answer = reply(session, &users, b"a");
                assert_eq!(client_opens(&mut client, &answer).unwrap(), b"a");
            }
            let mut stranger = client(method, 9, Some(1));
            let mut packet = seal(&mut stranger, b"q", t0());
            let e = UdpHead::open(&users, &mut packet).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::UnknownUser.message());
            let mut wrong_server = client(method, 7, Some(2));
            let mut packet = seal(&mut wrong_server, b"q", t0());
            assert!(UdpHead::open(&users, &mut packet).is_err());
        }
    }

    #[test]
    fn a_packet_id_is_taken_once_and_late_ones_within_the_window() {
        for method in METHODS {
            let users = users(method, false);
            let mut client = client(method, 7, None);
            let packets: Vec<Vec<u8>> = (0..1030).map(|_| seal(&mut client, b"p", t0())).collect();
            let mut sessions = Vec::new();
            assert!(serve(&users, &mut sessions, &packets[1029], t0()).is_ok());
            let replayed = serve(&users, &mut sessions, &packets[1029], t0()).unwrap_err();
            assert_eq!(replayed.to_string(), Ss2022Error::Replayed.message());
            assert!(
                serve(&users, &mut sessions, &packets[10], t0()).is_ok(),
                "late"
            );
            assert!(serve(&users, &mut sessions, &packets[10], t0()).is_err());
            let behind = serve(&users, &mut sessions, &packets[3], t0()).unwrap_err();
            assert_eq!(
                behind.to_string(),
                Ss2022Error::Replayed.message(),
                "{method:?}"
            );
        }
    }

    #[test]
    fn a_timestamp_more_than_30_s_off_is_refused_and_not_recorded() {
        for method in METHODS {
            let users = users(method, false);
            let mut client = client(method, 7, None);
            let packet = seal(&mut client, b"p", t0());
            let mut sessions = Vec::new();
            let later = |secs| t0() + Duration::from_secs(secs);
            let e = serve(&users, &mut sessions, &packet, later(31)).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::ClientTimestamp.message());
            assert!(sessions.is_empty(), "a refused packet keeps no session");
            assert!(serve(&users, &mut sessions, &packet, later(30)).is_ok());
            let early = t0() - Duration::from_secs(31);
            let packet = seal(&mut client, b"p", t0());
            let e = serve(&users, &mut sessions, &packet, early).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::ClientTimestamp.message());
            assert!(
                serve(&users, &mut sessions, &packet, t0()).is_ok(),
                "not recorded"
            );
        }
    }

    #[test]
    fn a_wrong_psk_another_session_and_random_bytes_are_refused() {
        for method in METHODS {
            let users = users(method, false);
            let mut wrong = client(method, 9, None);
            let packet = seal(&mut wrong, b"p", t0());
            assert!(serve(&users, &mut Vec::new(), &packet, t0()).is_err());

            let mut a = client(method, 7, None);
            let mut b = client(method, 7, None);
            let mut sessions = Vec::new();
            serve(&users, &mut sessions, &seal(&mut a, b"a", t0()), t0()).unwrap();
            let mut packet = seal(&mut b, b"b", t0());
            let head = UdpHead::open(&users, &mut packet).unwrap();
            let e = sessions[0].open(&head, &mut packet, t0()).unwrap_err();
            assert_eq!(e.to_string(), Ss2022Error::SessionMismatch.message());

            for len in [0, 1, 16, 27, 43, 60, 100, 1500] {
                let mut junk: Vec<u8> = (0..len).map(|i| (i * 37 + 1) as u8).collect();
                let opened = UdpHead::open(&users, &mut junk).and_then(|head| {
                    let mut session = UdpClientSession::new(&users, &head)?;
                    session.open(&head, &mut junk, t0())
                });
                assert!(opened.is_err(), "{method:?} {len}");
            }
        }
    }

    #[test]
    fn a_reply_that_does_not_fit_the_buffer_is_refused() {
        let method = Ss2022Method::Blake3Aes128Gcm;
        let users = users(method, false);
        let mut client = client(method, 7, None);
        let mut sessions = Vec::new();
        serve(&users, &mut sessions, &seal(&mut client, b"p", t0()), t0()).unwrap();
        let mut buf = vec![0; UDP_HEADROOM + 4];
        let e = sessions[0]
            .seal_reply(&users, &mut buf, 4, &dns(), t0())
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
