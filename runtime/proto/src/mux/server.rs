//! The server side of a Mux.Cool stream: its UDP sessions, XUDP's among
//! them, as one stream of packets each with its address, for the one UDP
//! association the runtime runs per connection.
//!
//! - A new UDP session opens to its target; its packets go to the address
//!   their keep frame names, or to the target. At most [`MAX_SESSIONS`]
//!   are open: a new one past them ends the session that has gone longest
//!   without sending, as the fan-out evicts its sub-links.
//! - A reply goes back in the session that last sent to its source, or
//!   else the one that sent last, in a keep frame naming the source; with
//!   no session open it is dropped.
//! - A TCP session is refused with an end frame (with the error bit), and
//!   so is a keep frame with data for a session that is not open, as Xray
//!   does; an end frame is answered with one. Those answers are owed: the
//!   runtime writes them ([`DatagramCodec::write_owed`]) when it can.
//! - XUDP's global id, which lets Xray move a session's UDP mapping to a
//!   new connection, is read past: a session's mapping here lives as long
//!   as its connection.

use std::io;
use std::ops::Range;

use super::frame::{self, Decoded, Network, Status, END_LEN, KEEP_HEADER_MAX};
use crate::codec::{DatagramCodec, Frame, Packet};
use crate::Address;

/// The most sessions open at once on one connection: the fan-out's 64
/// sub-links per UDP association are the model.
pub const MAX_SESSIONS: usize = 64;

/// The most destinations remembered for sending replies back in the
/// session that asked.
const MAX_ROUTES: usize = 4 * MAX_SESSIONS;

/// The most answers owed at once; one past them is not sent (the client
/// hears again with its next frame for that session).
const MAX_OWED: usize = MAX_SESSIONS;

struct Session {
    id: u16,
    target: Address,
    /// When it last sent, on the server's packet count.
    sent: u64,
}

/// The session that last sent to a destination.
struct Route {
    to: Address,
    session: u16,
}

/// The server side of one Mux.Cool stream.
#[derive(Default)]
pub struct Server {
    sessions: Vec<Session>,
    routes: Vec<Route>,
    /// The route to overwrite next once `routes` is full.
    next_route: usize,
    /// End frames owed: the session and whether it is refused.
    owed: Vec<(u16, bool)>,
    /// Packets opened so far.
    count: u64,
    /// Where a keep frame's head is built before it is put in place.
    scratch: Vec<u8>,
}

impl Server {
    pub fn new() -> Self {
        Server::default()
    }

    fn session(&self, id: u16) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == id)
    }

    fn open(&mut self, id: u16, target: Address) {
        if let Some(session) = self.sessions.iter_mut().find(|s| s.id == id) {
            session.target = target;
            return;
        }
        if self.sessions.len() >= MAX_SESSIONS {
            let oldest = self
                .sessions
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.sent)
                .map(|(at, _)| at);
            if let Some(at) = oldest {
                let evicted = self.sessions.swap_remove(at);
                self.owe(evicted.id, false);
            }
        }
        self.sessions.push(Session {
            id,
            target,
            sent: self.count,
        });
    }

    fn end(&mut self, id: u16) {
        if let Some(at) = self.sessions.iter().position(|s| s.id == id) {
            self.sessions.swap_remove(at);
            self.owe(id, false);
        }
    }

    fn owe(&mut self, id: u16, refused: bool) {
        if self.owed.len() < MAX_OWED && !self.owed.iter().any(|&(owed, _)| owed == id) {
            self.owed.push((id, refused));
        }
    }

    /// Notes that session `id` sent a packet to `to`.
    fn sent(&mut self, id: u16, to: &Address) {
        self.count += 1;
        if let Some(session) = self.sessions.iter_mut().find(|s| s.id == id) {
            session.sent = self.count;
        }
        if let Some(route) = self.routes.iter_mut().find(|r| r.to == *to) {
            route.session = id;
            return;
        }
        let route = Route {
            to: to.clone(),
            session: id,
        };
        if self.routes.len() < MAX_ROUTES {
            self.routes.push(route);
        } else {
            self.routes[self.next_route] = route;
            self.next_route = (self.next_route + 1) % MAX_ROUTES;
        }
    }

    /// The open session a reply from `source` goes back in.
    fn reply_session(&self, source: &Address) -> Option<u16> {
        let routed = self
            .routes
            .iter()
            .find(|r| r.to == *source)
            .map(|r| r.session)
            .filter(|&id| self.session(id).is_some());
        routed.or_else(|| self.sessions.iter().max_by_key(|s| s.sent).map(|s| s.id))
    }
}

impl DatagramCodec for Server {
    const HEADROOM: usize = KEEP_HEADER_MAX;
    const TAILROOM: usize = 0;

    /// A reply from `to` (its source), in a keep frame of the session it
    /// answers.
    fn seal_to(&mut self, buf: &mut [u8], len: usize, to: &Address) -> io::Result<Range<usize>> {
        let Ok(prefix) = u16::try_from(len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mux: a udp packet longer than 65535 bytes",
            ));
        };
        if buf.len() < Self::HEADROOM + len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the client runtime's buffer",
            ));
        }
        let Some(session) = self.reply_session(to) else {
            return Ok(Self::HEADROOM..Self::HEADROOM);
        };
        self.scratch.clear();
        frame::keep_header(session, to, prefix, &mut self.scratch);
        let start = Self::HEADROOM - self.scratch.len();
        buf[start..Self::HEADROOM].copy_from_slice(&self.scratch);
        Ok(start..Self::HEADROOM + len)
    }

    /// A Mux.Cool stream carries frames without packets too, which only
    /// [`DatagramCodec::open_frame`] takes: here one is an error.
    fn open_from(&mut self, buf: &mut [u8]) -> io::Result<Option<Packet>> {
        match self.open_frame(buf)? {
            None => Ok(None),
            Some(Frame::Packet(packet)) => Ok(Some(packet)),
            Some(Frame::Control { .. }) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "mux: a frame without a packet where a packet was expected",
            )),
        }
    }

    fn open_frame(&mut self, buf: &mut [u8]) -> io::Result<Option<Frame>> {
        let Some(Decoded {
            session,
            status,
            data,
            consumed,
        }) = frame::decode(buf)?
        else {
            return Ok(None);
        };
        let control = Ok(Some(Frame::Control { consumed }));
        let address = match status {
            Status::New {
                network: Network::Udp,
                target,
            } => {
                self.open(session, target);
                None
            }
            Status::New {
                network: Network::Tcp,
                ..
            } => {
                self.owe(session, true);
                return control;
            }
            Status::Keep { address } => {
                if self.session(session).is_none() {
                    if data.is_some() {
                        self.owe(session, false);
                    }
                    return control;
                }
                address
            }
            Status::End => {
                self.end(session);
                return control;
            }
            Status::KeepAlive => return control,
        };
        let (Some(payload), Some(open)) = (data, self.session(session)) else {
            return control;
        };
        let peer = address.unwrap_or_else(|| open.target.clone());
        self.sent(session, &peer);
        Ok(Some(Frame::Packet(Packet {
            consumed,
            peer,
            payload,
        })))
    }

    fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    fn write_owed(&mut self, out: &mut [u8]) -> usize {
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

    /// A keep frame of a UDP session with a packet to `to`.
    fn keep_to(session: u16, to: &str, data: &[u8]) -> Vec<u8> {
        frame(session, &[&[2, 1, 2][..], &v4(to)].concat(), Some(data))
    }

    /// Every event in `wire`, fed one byte more each call as a stream
    /// arrives: packets as (peer, payload), control frames as `None`.
    fn events(server: &mut Server, wire: &[u8]) -> Vec<Option<(Address, Vec<u8>)>> {
        let mut wire = wire.to_vec();
        let (mut start, mut end, mut out) = (0, 0, Vec::new());
        while end <= wire.len() {
            match server.open_frame(&mut wire[start..end]).unwrap() {
                None => end += 1,
                Some(Frame::Control { consumed }) => {
                    out.push(None);
                    start += consumed;
                }
                Some(Frame::Packet(packet)) => {
                    let payload =
                        wire[start + packet.payload.start..start + packet.payload.end].to_vec();
                    out.push(Some((packet.peer, payload)));
                    start += packet.consumed;
                }
            }
        }
        assert_eq!(start, wire.len(), "every frame was taken");
        out
    }

    /// A reply of `payload` from `source`, sealed; `None` if dropped.
    fn reply(server: &mut Server, source: &Address, payload: &[u8]) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; Server::HEADROOM + payload.len()];
        buf[Server::HEADROOM..].copy_from_slice(payload);
        let range = server.seal_to(&mut buf, payload.len(), source).unwrap();
        (!range.is_empty()).then(|| buf[range].to_vec())
    }

    fn owed(server: &mut Server) -> Vec<u8> {
        let mut out = vec![0u8; 1024];
        let n = server.write_owed(&mut out);
        out.truncate(n);
        out
    }

    #[test]
    fn an_xudp_session_as_sing_box_sends_it_carries_packets_to_each_address_and_replies_name_their_source(
    ) {
        // sing-box: session 0, new with the first packet, then keeps that
        // name each packet's address.
        let mut wire = new_udp(0, "192.0.2.53:53", Some(b"first"));
        wire.extend(keep_to(0, "198.51.100.1:53", b"second"));
        wire.extend(frame(0, b"\x02\x01", Some(b"third")));
        let mut server = Server::new();
        assert_eq!(
            events(&mut server, &wire),
            [
                Some((ip("192.0.2.53:53"), b"first".to_vec())),
                Some((ip("198.51.100.1:53"), b"second".to_vec())),
                Some((ip("192.0.2.53:53"), b"third".to_vec())),
            ]
        );
        let sealed = reply(&mut server, &ip("198.51.100.1:53"), b"answer").unwrap();
        assert_eq!(sealed, keep_to(0, "198.51.100.1:53", b"answer"));
        // A reply from a source nobody sent to still reaches the session.
        let sealed = reply(&mut server, &ip("203.0.113.9:9"), b"cone").unwrap();
        assert_eq!(sealed, keep_to(0, "203.0.113.9:9", b"cone"));
        assert!(!server.owes());
    }

    #[test]
    fn replies_go_back_in_the_session_that_last_sent_to_their_source() {
        let mut wire = new_udp(1, "192.0.2.1:53", None);
        wire.extend(new_udp(2, "192.0.2.2:53", Some(b"to two")));
        wire.extend(keep_to(1, "192.0.2.1:53", b"to one"));
        let mut server = Server::new();
        let got = events(&mut server, &wire);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0], None,
            "a new frame without data opens, carrying nothing"
        );
        for (source, session) in [
            ("192.0.2.2:53", 2),
            ("192.0.2.1:53", 1),
            ("192.0.2.2:53", 2),
        ] {
            let sealed = reply(&mut server, &ip(source), b"r").unwrap();
            assert_eq!(sealed, keep_to(session, source, b"r"), "from {source}");
        }
        // Session 2 ends: its replies go to the one left, and the end is
        // answered.
        events(&mut server, &frame(2, b"\x03\x00", None));
        assert_eq!(owed(&mut server), frame::end(2, false));
        let sealed = reply(&mut server, &ip("192.0.2.2:53"), b"late").unwrap();
        assert_eq!(sealed, keep_to(1, "192.0.2.2:53", b"late"));
        events(&mut server, &frame(1, b"\x03\x00", None));
        assert_eq!(
            reply(&mut server, &ip("192.0.2.1:53"), b"none"),
            None,
            "no session: dropped"
        );
    }

    #[test]
    fn tcp_sessions_and_data_for_unknown_sessions_are_answered_with_end_frames() {
        let mut wire = frame(
            5,
            &[&[1, 1, 1][..], &v4("192.0.2.1:80")].concat(),
            Some(b"GET /"),
        );
        wire.extend(frame(5, b"\x02\x01", Some(b" HTTP/1.1")));
        wire.extend(frame(5, b"\x02\x01", Some(b"\r\n")));
        wire.extend(frame(6, b"\x02\x00", None));
        wire.extend(frame(9, b"\x04\x01", Some(b"keep alive")));
        wire.extend(frame(8, b"\x03\x00", None));
        let mut server = Server::new();
        assert_eq!(events(&mut server, &wire), vec![None; 6]);
        assert!(server.owes());
        // Once for session 5, however many frames it sent; nothing for
        // the others.
        assert_eq!(owed(&mut server), frame::end(5, true));
        assert!(!server.owes());
    }

    #[test]
    fn owed_frames_are_written_whole_as_they_fit() {
        let mut server = Server::new();
        for id in 0..3 {
            events(
                &mut server,
                &frame(id, &[&[1, 0, 1][..], &v4("192.0.2.1:80")].concat(), None),
            );
        }
        let mut out = [0u8; 2 * END_LEN + 5];
        assert_eq!(server.write_owed(&mut out), 2 * END_LEN);
        assert_eq!(&out[..END_LEN], frame::end(0, true));
        assert_eq!(server.write_owed(&mut out[..END_LEN - 1]), 0);
        assert_eq!(server.write_owed(&mut out), END_LEN);
        assert_eq!(&out[..END_LEN], frame::end(2, true));
        assert!(!server.owes());
    }

    #[test]
    fn a_session_past_the_limit_ends_the_one_that_sent_least_recently() {
        let mut server = Server::new();
        for id in 0..MAX_SESSIONS as u16 {
            events(&mut server, &new_udp(id, "192.0.2.1:53", Some(b"q")));
        }
        // Session 0 sends again, so session 1 is now the oldest.
        events(&mut server, &keep_to(0, "192.0.2.1:53", b"q"));
        assert!(!server.owes());
        let got = events(&mut server, &new_udp(1000, "192.0.2.9:53", Some(b"new")));
        assert_eq!(got, [Some((ip("192.0.2.9:53"), b"new".to_vec()))]);
        assert_eq!(server.sessions.len(), MAX_SESSIONS);
        assert_eq!(owed(&mut server), frame::end(1, false));
        let got = events(&mut server, &keep_to(1, "192.0.2.1:53", b"evicted"));
        assert_eq!(got, [None]);
        assert_eq!(owed(&mut server), frame::end(1, false));
    }

    #[test]
    fn a_packet_too_long_for_the_prefix_or_the_buffer_is_refused() {
        let mut server = Server::new();
        events(&mut server, &new_udp(0, "192.0.2.1:53", Some(b"q")));
        let to = ip("192.0.2.1:53");
        let mut buf = vec![0u8; Server::HEADROOM + 65536];
        let e = server.seal_to(&mut buf, 65536, &to).unwrap_err();
        assert_eq!(e.to_string(), "mux: a udp packet longer than 65535 bytes");
        let e = server
            .seal_to(&mut buf[..Server::HEADROOM + 9], 10, &to)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(server.seal_to(&mut buf, 65535, &to).is_ok());
    }

    #[test]
    fn open_from_takes_packets_and_refuses_a_control_frame() {
        let mut server = Server::new();
        let mut wire = new_udp(0, "192.0.2.1:53", Some(b"q"));
        let packet = server.open_from(&mut wire).unwrap().unwrap();
        assert_eq!(packet.consumed, wire.len());
        let mut end = frame(0, b"\x03\x00", None);
        assert!(server.open_from(&mut end).is_err());
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
                match server.open_frame(&mut bytes[start..]) {
                    Ok(Some(Frame::Packet(Packet {
                        consumed, payload, ..
                    }))) => {
                        assert!(payload.end <= consumed && consumed <= bytes.len() - start);
                        start += consumed;
                    }
                    Ok(Some(Frame::Control { consumed })) => {
                        assert!(consumed > 0 && consumed <= bytes.len() - start);
                        start += consumed;
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            assert!(server.sessions.len() <= MAX_SESSIONS);
            assert!(server.owed.len() <= MAX_OWED);
        }
    }
}
