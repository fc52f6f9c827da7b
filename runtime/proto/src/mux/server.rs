//! The server side of a Mux.Cool stream: its TCP sessions, each a flow of
//! its own, and its UDP sessions, XUDP's among them, as one stream of
//! packets each with its address, for the one UDP association the runtime
//! runs per connection.
//!
//! [`Server::open_frame`] reads a client's frame and says what it asks of
//! the runtime ([`Event`]); the runtime moves the bytes and writes the
//! frames this side sends: [`Server::data_header`] and [`Server::end`] for
//! a TCP session's bytes and end, [`Server::seal_reply`] for a UDP reply,
//! and the end frames owed in answer ([`Server::write_owed`]).
//!
//! - A new TCP session is a flow to its target, known to the runtime by a
//!   [`Key`] that no later session shares (a client may reuse an id). Its
//!   keep frames carry its bytes; its end frame shuts the target's write
//!   side (with the error bit: the session is dropped at once), and the
//!   target's end is sent back as an end frame, as v2ray does. A new frame
//!   for an id in use replaces that session, which is dropped.
//! - A new UDP session opens to its target; its packets go to the address
//!   their keep frame names, or to the target. Each UDP session is an
//!   association of its own, as v2ray and Xray dispatch each session on
//!   its own, so two sessions sending to one destination each get their
//!   own replies: a reply goes back in its session's keep frame naming its
//!   source.
//! - At most [`MAX_SESSIONS`] are open: a new UDP session past them ends
//!   the UDP session that has gone longest without sending, as the
//!   fan-out evicts its sub-links; a new TCP session past them, or a UDP
//!   one when all are TCP, is refused with an end frame with the error
//!   bit.
//! - A keep frame with data for a session that is not open is answered
//!   with an end frame, as Xray does; a UDP session's end frame is
//!   answered with one. Those answers are owed: the runtime writes them
//!   when it can.
//! - XUDP's global id, which lets Xray move a session's UDP mapping to a
//!   new connection, is read past: a session's mapping here lives as long
//!   as its connection.

use std::io;
use std::ops::Range;

use super::frame::{self, Decoded, Network, Status, DATA_HEADER_LEN, END_LEN, KEEP_HEADER_MAX};
use crate::Address;

/// The most sessions open at once on one connection: the fan-out's 64
/// sub-links per UDP association are the model.
pub const MAX_SESSIONS: usize = 64;

/// The most bytes a UDP reply's keep frame adds in front of its payload.
pub const REPLY_HEADROOM: usize = KEEP_HEADER_MAX;

/// The most answers owed at once; one past them is not sent (the client
/// hears again with its next frame for that session).
const MAX_OWED: usize = MAX_SESSIONS;

/// A session, as the runtime knows it: unique over the connection's life,
/// where a wire id may be used again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key(u64);

enum Kind {
    Tcp(Key),
    Udp {
        key: Key,
        target: Address,
        /// When it last sent, on the server's packet count.
        sent: u64,
    },
}

struct Session {
    id: u16,
    kind: Kind,
}

/// What a client's frame asks of the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing: a keep-alive, a UDP session opened without a packet, a
    /// frame read past or answered with an owed end frame.
    Nothing,
    /// A TCP session opens: route and dial `target`; the frame's data, if
    /// any, are its first bytes.
    Open { key: Key, target: Address },
    /// The frame's data are more bytes of TCP session `key`.
    Data { key: Key },
    /// The client sends no more of TCP session `key`: shut the target's
    /// write side.
    End { key: Key },
    /// The frame's data are a packet of UDP session `key` to `peer`.
    Packet { key: Key, peer: Address },
}

/// One frame read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The bytes at the start of the input the frame took.
    pub consumed: usize,
    pub event: Event,
    /// Where the frame's data lie in the input (empty without data).
    pub data: Range<usize>,
    /// A session the frame ended: a TCP session ended abruptly (a new
    /// session took its id, or the client ended it with the error bit), or
    /// a UDP session ended or evicted. The runtime drops it and sends
    /// nothing more of it.
    pub aborted: Option<Key>,
}

/// The server side of one Mux.Cool stream.
#[derive(Default)]
pub struct Server {
    sessions: Vec<Session>,
    /// End frames owed: the session and whether it is refused.
    owed: Vec<(u16, bool)>,
    /// Packets opened so far.
    count: u64,
    /// The key the next session gets.
    next_key: u64,
    /// Where a keep frame's head is built before it is put in place.
    scratch: Vec<u8>,
}

impl Server {
    pub fn new() -> Self {
        Server::default()
    }

    fn position(&self, id: u16) -> Option<usize> {
        self.sessions.iter().position(|s| s.id == id)
    }

    fn tcp(&self, key: Key) -> Option<&Session> {
        self.sessions
            .iter()
            .find(|s| matches!(s.kind, Kind::Tcp(k) if k == key))
    }

    fn new_key(&mut self) -> Key {
        let key = Key(self.next_key);
        self.next_key += 1;
        key
    }

    /// Takes session `id` out of the table, ending it.
    fn take(&mut self, id: u16) -> Option<Key> {
        let at = self.position(id)?;
        match self.sessions.swap_remove(at).kind {
            Kind::Tcp(key) | Kind::Udp { key, .. } => Some(key),
        }
    }

    /// Makes room for one more session; `Err` when none can be made, else
    /// the UDP session evicted for it, if one was.
    fn room(&mut self, udp: bool) -> Result<Option<Key>, ()> {
        if self.sessions.len() < MAX_SESSIONS {
            return Ok(None);
        }
        if !udp {
            return Err(());
        }
        let oldest = self
            .sessions
            .iter()
            .enumerate()
            .filter_map(|(at, s)| match s.kind {
                Kind::Udp { sent, .. } => Some((at, sent)),
                Kind::Tcp(_) => None,
            })
            .min_by_key(|&(_, sent)| sent)
            .map(|(at, _)| at);
        let at = oldest.ok_or(())?;
        let evicted = self.sessions.swap_remove(at);
        self.owe(evicted.id, false);
        match evicted.kind {
            Kind::Udp { key, .. } | Kind::Tcp(key) => Ok(Some(key)),
        }
    }

    /// A new UDP session `id` to `target`; one already open there is only
    /// pointed at the new target. Returns the session it ended: the one
    /// that had the id, or the one evicted for it.
    fn open_udp(&mut self, id: u16, target: Address) -> Option<Key> {
        if let Some(Session {
            kind: Kind::Udp { target: old, .. },
            ..
        }) = self.sessions.iter_mut().find(|s| s.id == id)
        {
            *old = target;
            return None;
        }
        let replaced = self.take(id);
        match self.room(true) {
            Ok(evicted) => {
                let key = self.new_key();
                self.sessions.push(Session {
                    id,
                    kind: Kind::Udp {
                        key,
                        target,
                        sent: self.count,
                    },
                });
                replaced.or(evicted)
            }
            Err(()) => {
                self.owe(id, true);
                replaced
            }
        }
    }

    /// A new TCP session `id`; returns its key, if it has room, and the
    /// session it replaced.
    fn open_tcp(&mut self, id: u16) -> (Option<Key>, Option<Key>) {
        let aborted = self.take(id);
        if self.room(false).is_err() {
            self.owe(id, true);
            return (None, aborted);
        }
        let key = self.new_key();
        self.sessions.push(Session {
            id,
            kind: Kind::Tcp(key),
        });
        (Some(key), aborted)
    }

    fn owe(&mut self, id: u16, refused: bool) {
        if self.owed.len() < MAX_OWED && !self.owed.iter().any(|&(owed, _)| owed == id) {
            self.owed.push((id, refused));
        }
    }

    /// Notes that UDP session `id` sent a packet: the session that sent
    /// least recently is the first evicted.
    fn sent(&mut self, id: u16) {
        self.count += 1;
        if let Some(Session {
            kind: Kind::Udp { sent, .. },
            ..
        }) = self.sessions.iter_mut().find(|s| s.id == id)
        {
            *sent = self.count;
        }
    }

    /// The key of UDP session `id`.
    fn udp(&self, id: u16) -> Option<Key> {
        self.sessions.iter().find_map(|s| match s.kind {
            Kind::Udp { key, .. } if s.id == id => Some(key),
            _ => None,
        })
    }

    /// Reads the frame at the start of `buf`; `Ok(None)` until it is
    /// whole. An error (bad metadata) fails the stream, as it does Xray's.
    pub fn open_frame(&mut self, buf: &[u8]) -> io::Result<Option<Step>> {
        let Some(Decoded {
            session: id,
            status,
            data,
            consumed,
        }) = frame::decode(buf)?
        else {
            return Ok(None);
        };
        let data = data.unwrap_or(consumed..consumed);
        let has_data = !data.is_empty();
        let mut step = Step {
            consumed,
            event: Event::Nothing,
            data,
            aborted: None,
        };
        match status {
            Status::New {
                network: Network::Tcp,
                target,
            } => {
                let (key, aborted) = self.open_tcp(id);
                step.aborted = aborted;
                if let Some(key) = key {
                    step.event = Event::Open { key, target };
                }
            }
            Status::New {
                network: Network::Udp,
                target,
            } => {
                step.aborted = self.open_udp(id, target.clone());
                if let (true, Some(key)) = (has_data, self.udp(id)) {
                    self.sent(id);
                    step.event = Event::Packet { key, peer: target };
                }
            }
            Status::Keep { address } => match self.position(id).map(|at| &self.sessions[at].kind) {
                Some(&Kind::Tcp(key)) => {
                    if has_data {
                        step.event = Event::Data { key };
                    }
                }
                Some(&Kind::Udp {
                    key, ref target, ..
                }) => {
                    if has_data {
                        let peer = address.unwrap_or_else(|| target.clone());
                        self.sent(id);
                        step.event = Event::Packet { key, peer };
                    }
                }
                None => {
                    if has_data {
                        self.owe(id, false);
                    }
                }
            },
            Status::End { error } => match self.position(id).map(|at| &self.sessions[at].kind) {
                // The session stays open until the runtime closes it: the
                // target may still be sending.
                Some(&Kind::Tcp(key)) if !error => step.event = Event::End { key },
                Some(Kind::Tcp(_)) => step.aborted = self.take(id),
                Some(Kind::Udp { .. }) => {
                    step.aborted = self.take(id);
                    self.owe(id, false);
                }
                None => {}
            },
            Status::KeepAlive => {}
        }
        if !matches!(
            step.event,
            Event::Open { .. } | Event::Data { .. } | Event::Packet { .. }
        ) {
            step.data = consumed..consumed;
        }
        Ok(Some(step))
    }

    /// The head of a keep frame carrying `len` bytes of TCP session `key`;
    /// `None` once the session was aborted.
    pub fn data_header(&self, key: Key, len: u16) -> Option<[u8; DATA_HEADER_LEN]> {
        self.tcp(key).map(|s| frame::data_header(s.id, len))
    }

    /// The end frame of TCP session `key`, whose target ended (or, with
    /// `error`, failed); `None` once the session was aborted. The session
    /// stays open for the client's bytes until [`Server::closed`].
    pub fn end(&self, key: Key, error: bool) -> Option<[u8; END_LEN]> {
        self.tcp(key).map(|s| frame::end(s.id, error))
    }

    /// TCP session `key` is over on the server's side: its id is free.
    pub fn closed(&mut self, key: Key) {
        if let Some(at) = self
            .sessions
            .iter()
            .position(|s| matches!(s.kind, Kind::Tcp(k) if k == key))
        {
            self.sessions.swap_remove(at);
        }
    }

    /// Seals a reply from `source` to UDP session `key`, the `len` bytes at
    /// `buf[REPLY_HEADROOM..]`, in a keep frame of that session; returns
    /// the frame's range in `buf`, empty once the session ended (the reply
    /// is dropped).
    pub fn seal_reply(
        &mut self,
        key: Key,
        buf: &mut [u8],
        len: usize,
        source: &Address,
    ) -> io::Result<Range<usize>> {
        let Ok(prefix) = u16::try_from(len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mux: a udp packet longer than 65535 bytes",
            ));
        };
        if buf.len() < REPLY_HEADROOM + len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the client runtime's buffer",
            ));
        }
        let session = self.sessions.iter().find_map(|s| match s.kind {
            Kind::Udp { key: k, .. } if k == key => Some(s.id),
            _ => None,
        });
        let Some(session) = session else {
            return Ok(REPLY_HEADROOM..REPLY_HEADROOM);
        };
        self.scratch.clear();
        frame::keep_header(session, source, prefix, &mut self.scratch);
        let start = REPLY_HEADROOM - self.scratch.len();
        buf[start..REPLY_HEADROOM].copy_from_slice(&self.scratch);
        Ok(start..REPLY_HEADROOM + len)
    }

    /// Whether end frames are owed to the client.
    pub fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    /// Writes as many owed end frames as fit whole into `out`; returns the
    /// bytes written.
    pub fn write_owed(&mut self, out: &mut [u8]) -> usize {
        let fit = (out.len() / END_LEN).min(self.owed.len());
        for (&(session, refused), slot) in
            self.owed[..fit].iter().zip(out.chunks_exact_mut(END_LEN))
        {
            slot.copy_from_slice(&frame::end(session, refused));
        }
        self.owed.drain(..fit);
        fit * END_LEN
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mux::frame::tests::frame;

    fn ip(text: &str) -> Address {
        Address::Ip(text.parse().unwrap())
    }

    /// The port and IPv4 address of `addr` as a frame names them.
    fn v4(addr: &str) -> Vec<u8> {
        let addr: std::net::SocketAddrV4 = addr.parse().unwrap();
        let mut out = addr.port().to_be_bytes().to_vec();
        out.push(1);
        out.extend_from_slice(&addr.ip().octets());
        out
    }

    /// A new UDP session to `target`, with its first packet when given.
    fn new_udp(session: u16, target: &str, data: Option<&[u8]>) -> Vec<u8> {
        let option = u8::from(data.is_some());
        let meta = [&[1, option, 2][..], &v4(target), b"8bytesid"].concat();
        frame(session, &meta, data)
    }

    /// A new TCP session to `target`, with its first bytes when given.
    fn new_tcp(session: u16, target: &str, data: Option<&[u8]>) -> Vec<u8> {
        let option = u8::from(data.is_some());
        frame(session, &[&[1, option, 1][..], &v4(target)].concat(), data)
    }

    /// A keep frame of a UDP session with a packet to `to`.
    fn keep_to(session: u16, to: &str, data: &[u8]) -> Vec<u8> {
        frame(session, &[&[2, 1, 2][..], &v4(to)].concat(), Some(data))
    }

    /// A keep frame with data and no address.
    fn keep(session: u16, data: &[u8]) -> Vec<u8> {
        frame(session, b"\x02\x01", Some(data))
    }

    fn end(session: u16) -> Vec<u8> {
        frame(session, b"\x03\x00", None)
    }

    /// Every frame in `wire`, fed one byte more each call as a stream
    /// arrives: its event, its data and the session it aborted.
    fn steps(server: &mut Server, wire: &[u8]) -> Vec<(Event, Vec<u8>, Option<Key>)> {
        let (mut start, mut end, mut out) = (0, 0, Vec::new());
        while end <= wire.len() {
            match server.open_frame(&wire[start..end]).unwrap() {
                None => end += 1,
                Some(step) => {
                    assert!(step.data.start <= step.data.end && step.data.end <= step.consumed);
                    let data = wire[start + step.data.start..start + step.data.end].to_vec();
                    out.push((step.event, data, step.aborted));
                    start += step.consumed;
                }
            }
        }
        assert_eq!(start, wire.len(), "every frame was taken");
        out
    }

    /// The packets in `wire` as (peer, payload); other frames as `None`.
    fn events(server: &mut Server, wire: &[u8]) -> Vec<Option<(Address, Vec<u8>)>> {
        steps(server, wire)
            .into_iter()
            .map(|(event, data, _)| match event {
                Event::Packet { peer, .. } => Some((peer, data)),
                _ => None,
            })
            .collect()
    }

    /// The UDP session of the first packet in `wire`.
    fn packet_key(server: &mut Server, wire: &[u8]) -> Key {
        steps(server, wire)
            .into_iter()
            .find_map(|(event, ..)| match event {
                Event::Packet { key, .. } => Some(key),
                _ => None,
            })
            .expect("a packet")
    }

    /// A reply of `payload` from `source` to UDP session `key`, sealed;
    /// `None` if dropped.
    fn reply(server: &mut Server, key: Key, source: &Address, payload: &[u8]) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; REPLY_HEADROOM + payload.len()];
        buf[REPLY_HEADROOM..].copy_from_slice(payload);
        let range = server
            .seal_reply(key, &mut buf, payload.len(), source)
            .unwrap();
        (!range.is_empty()).then(|| buf[range].to_vec())
    }

    fn owed(server: &mut Server) -> Vec<u8> {
        let mut out = vec![0u8; 1024];
        let n = server.write_owed(&mut out);
        out.truncate(n);
        out
    }

    /// The key of the session a step opened.
    fn opened(step: &(Event, Vec<u8>, Option<Key>)) -> Key {
        match step.0 {
            Event::Open { key, .. } => key,
            ref other => panic!("not an open: {other:?}"),
        }
    }

    #[test]
    fn an_xudp_session_as_sing_box_sends_it_carries_packets_to_each_address_and_replies_name_their_source(
    ) {
        // sing-box: session 0, new with the first packet, then keeps that
        // name each packet's address.
        let mut server = Server::new();
        let key = packet_key(&mut server, &new_udp(0, "192.0.2.53:53", Some(b"first")));
        let mut wire = keep_to(0, "198.51.100.1:53", b"second");
        wire.extend(keep(0, b"third"));
        assert_eq!(
            events(&mut server, &wire),
            [
                Some((ip("198.51.100.1:53"), b"second".to_vec())),
                Some((ip("192.0.2.53:53"), b"third".to_vec())),
            ]
        );
        let sealed = reply(&mut server, key, &ip("198.51.100.1:53"), b"answer").unwrap();
        assert_eq!(sealed, keep_to(0, "198.51.100.1:53", b"answer"));
        // A reply from a source nobody sent to still reaches the session.
        let sealed = reply(&mut server, key, &ip("203.0.113.9:9"), b"cone").unwrap();
        assert_eq!(sealed, keep_to(0, "203.0.113.9:9", b"cone"));
        assert!(!server.owes());
    }

    #[test]
    fn two_udp_sessions_to_one_destination_each_get_their_own_replies_until_they_end() {
        let mut server = Server::new();
        let got = steps(&mut server, &new_udp(1, "192.0.2.1:53", None));
        assert_eq!(
            got,
            [(Event::Nothing, vec![], None)],
            "a new frame without data opens, carrying nothing"
        );
        let two = packet_key(&mut server, &new_udp(2, "192.0.2.1:53", Some(b"to two")));
        let one = packet_key(&mut server, &keep(1, b"to one"));
        assert_ne!(one, two);
        let dns = ip("192.0.2.1:53");
        for (key, session) in [(two, 2), (one, 1), (two, 2)] {
            let sealed = reply(&mut server, key, &dns, b"r").unwrap();
            assert_eq!(sealed, keep_to(session, "192.0.2.1:53", b"r"));
        }
        // Session 2 ends: its association is dropped, its replies too, and
        // the end is answered.
        let got = steps(&mut server, &end(2));
        assert_eq!(got, [(Event::Nothing, vec![], Some(two))]);
        assert_eq!(owed(&mut server), frame::end(2, false));
        assert_eq!(reply(&mut server, two, &dns, b"late"), None);
        assert!(reply(&mut server, one, &dns, b"still").is_some());
    }

    #[test]
    fn a_tcp_session_opens_carries_its_bytes_ends_and_is_closed_by_the_runtime() {
        let mut wire = new_tcp(5, "192.0.2.1:80", Some(b"GET /"));
        wire.extend(keep(5, b" HTTP/1.1\r\n"));
        wire.extend(frame(5, b"\x02\x00", None));
        wire.extend(frame(5, b"\x04\x00", None));
        wire.extend(end(5));
        let mut server = Server::new();
        let got = steps(&mut server, &wire);
        let key = opened(&got[0]);
        assert_eq!(
            got,
            [
                (
                    Event::Open {
                        key,
                        target: ip("192.0.2.1:80")
                    },
                    b"GET /".to_vec(),
                    None
                ),
                (Event::Data { key }, b" HTTP/1.1\r\n".to_vec(), None),
                (Event::Nothing, vec![], None),
                (Event::Nothing, vec![], None),
                (Event::End { key }, vec![], None),
            ]
        );
        assert!(!server.owes(), "the client's end is not answered");
        // The target answers and ends; the session takes bytes until the
        // runtime closes it.
        assert_eq!(
            server.data_header(key, 300),
            Some(frame::data_header(5, 300))
        );
        assert_eq!(server.end(key, false), Some(frame::end(5, false)));
        let got = steps(&mut server, &keep(5, b"late"));
        assert_eq!(got, [(Event::Data { key }, b"late".to_vec(), None)]);
        server.closed(key);
        assert_eq!(server.data_header(key, 1), None);
        assert_eq!(server.end(key, true), None);
        // Its id is free: data for it is answered with an end frame, and a
        // new session may take it, with a key of its own.
        assert_eq!(steps(&mut server, &keep(5, b"x"))[0].0, Event::Nothing);
        assert_eq!(owed(&mut server), frame::end(5, false));
        let again = opened(&steps(&mut server, &new_tcp(5, "192.0.2.1:81", None))[0]);
        assert_ne!(again, key);
    }

    #[test]
    fn a_new_frame_for_an_id_in_use_replaces_its_session_and_an_error_end_aborts_one() {
        let mut server = Server::new();
        let first = opened(&steps(&mut server, &new_tcp(1, "192.0.2.1:80", None))[0]);
        let got = steps(&mut server, &new_tcp(1, "192.0.2.2:80", Some(b"hi")));
        let second = opened(&got[0]);
        assert_ne!(first, second);
        assert_eq!((got[0].1.as_slice(), got[0].2), (&b"hi"[..], Some(first)));
        assert_eq!(server.data_header(first, 1), None, "the first is gone");
        assert_eq!(server.end(second, false), Some(frame::end(1, false)));
        // A UDP session taking the id replaces it too.
        let got = steps(&mut server, &new_udp(1, "192.0.2.3:53", Some(b"q")));
        let Event::Packet { key, ref peer } = got[0].0 else {
            panic!("a packet")
        };
        assert_ne!(key, second);
        assert_eq!(
            (peer, got[0].1.as_slice(), got[0].2),
            (&ip("192.0.2.3:53"), &b"q"[..], Some(second))
        );
        // An end with the error bit drops a TCP session at once.
        let third = opened(&steps(&mut server, &new_tcp(2, "192.0.2.1:80", None))[0]);
        let got = steps(&mut server, &frame(2, b"\x03\x02", None));
        assert_eq!(got, [(Event::Nothing, vec![], Some(third))]);
        assert_eq!(server.end(third, false), None);
        assert!(!server.owes());
    }

    #[test]
    fn data_for_unknown_sessions_is_answered_with_one_end_frame_and_others_are_read_past() {
        let mut wire = keep(5, b" HTTP/1.1");
        wire.extend(keep(5, b"\r\n"));
        wire.extend(frame(6, b"\x02\x00", None));
        wire.extend(frame(9, b"\x04\x01", Some(b"keep alive")));
        wire.extend(end(8));
        let mut server = Server::new();
        let got = steps(&mut server, &wire);
        assert_eq!(got, vec![(Event::Nothing, vec![], None); 5]);
        assert!(server.owes());
        // Once for session 5, however many frames it sent; nothing for
        // the others.
        assert_eq!(owed(&mut server), frame::end(5, false));
        assert!(!server.owes());
    }

    #[test]
    fn owed_frames_are_written_whole_as_they_fit() {
        let mut server = Server::new();
        for id in 0..3 {
            events(&mut server, &keep(id, b"orphan"));
        }
        let mut out = [0u8; 2 * END_LEN + 5];
        assert_eq!(server.write_owed(&mut out), 2 * END_LEN);
        assert_eq!(&out[..END_LEN], frame::end(0, false));
        assert_eq!(server.write_owed(&mut out[..END_LEN - 1]), 0);
        assert_eq!(server.write_owed(&mut out), END_LEN);
        assert_eq!(&out[..END_LEN], frame::end(2, false));
        assert!(!server.owes());
    }

    #[test]
    fn a_udp_session_past_the_limit_ends_the_one_that_sent_least_recently() {
        let mut server = Server::new();
        let keys: Vec<Key> = (0..MAX_SESSIONS as u16)
            .map(|id| packet_key(&mut server, &new_udp(id, "192.0.2.1:53", Some(b"q"))))
            .collect();
        // Session 0 sends again, so session 1 is now the oldest.
        events(&mut server, &keep_to(0, "192.0.2.1:53", b"q"));
        assert!(!server.owes());
        let got = steps(&mut server, &new_udp(1000, "192.0.2.9:53", Some(b"new")));
        assert_eq!(got[0].2, Some(keys[1]), "session 1 is evicted");
        assert_eq!(got[0].1, b"new");
        assert_eq!(server.sessions.len(), MAX_SESSIONS);
        assert_eq!(owed(&mut server), frame::end(1, false));
        let got = events(&mut server, &keep_to(1, "192.0.2.1:53", b"evicted"));
        assert_eq!(got, [None]);
        assert_eq!(owed(&mut server), frame::end(1, false));
    }

    #[test]
    fn a_tcp_session_past_the_limit_is_refused_and_never_evicts_another() {
        let mut server = Server::new();
        let mut keys = Vec::new();
        for id in 0..MAX_SESSIONS as u16 - 1 {
            keys.push(opened(
                &steps(&mut server, &new_tcp(id, "192.0.2.1:80", None))[0],
            ));
        }
        events(&mut server, &new_udp(100, "192.0.2.1:53", Some(b"q")));
        let got = steps(&mut server, &new_tcp(200, "192.0.2.1:80", Some(b"GET")));
        assert_eq!(got, [(Event::Nothing, vec![], None)]);
        assert_eq!(owed(&mut server), frame::end(200, true));
        // A UDP session may take the UDP one's place; with none left, it is
        // refused too.
        events(&mut server, &new_udp(101, "192.0.2.1:53", None));
        assert_eq!(owed(&mut server), frame::end(100, false));
        events(&mut server, &end(101));
        assert_eq!(owed(&mut server), frame::end(101, false));
        keys.push(opened(
            &steps(&mut server, &new_tcp(63, "192.0.2.1:80", None))[0],
        ));
        assert_eq!(
            events(&mut server, &new_udp(102, "192.0.2.1:53", Some(b"q"))),
            [None]
        );
        assert_eq!(owed(&mut server), frame::end(102, true));
        assert!(keys.iter().all(|&key| server.end(key, false).is_some()));
        // Closing one makes room.
        server.closed(keys[0]);
        opened(&steps(&mut server, &new_tcp(300, "192.0.2.1:80", None))[0]);
    }

    #[test]
    fn a_packet_too_long_for_the_prefix_or_the_buffer_is_refused() {
        let mut server = Server::new();
        let key = packet_key(&mut server, &new_udp(0, "192.0.2.1:53", Some(b"q")));
        let to = ip("192.0.2.1:53");
        let mut buf = vec![0u8; REPLY_HEADROOM + 65536];
        let e = server.seal_reply(key, &mut buf, 65536, &to).unwrap_err();
        assert_eq!(e.to_string(), "mux: a udp packet longer than 65535 bytes");
        let e = server
            .seal_reply(key, &mut buf[..REPLY_HEADROOM + 9], 10, &to)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(server.seal_reply(key, &mut buf, 65535, &to).is_ok());
    }

    #[test]
    fn garbage_fails_or_waits_and_never_panics_and_sessions_stay_bounded() {
        let mut next = crate::codec::noise(0x9e37_79b9_7f4a_7c15);
        for _ in 0..3000 {
            let mut server = Server::new();
            let len = (next() % 200) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len > 8 && next().is_multiple_of(2) {
                // A plausible head, so the bytes after it are exercised.
                bytes[0] = 0;
                bytes[1] = (next() % 40) as u8 + 4;
                bytes[4] = (next() % 5) as u8;
                bytes[5] = (next() % 3) as u8;
            }
            let mut start = 0;
            while start < bytes.len() {
                match server.open_frame(&bytes[start..]) {
                    Ok(Some(step)) => {
                        assert!(step.data.end <= step.consumed);
                        assert!(step.consumed > 0 && step.consumed <= bytes.len() - start);
                        start += step.consumed;
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            assert!(server.sessions.len() <= MAX_SESSIONS);
            assert!(server.owed.len() <= MAX_OWED);
        }
    }
}
