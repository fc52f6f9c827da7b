//! VLESS UDP: after the response header, every packet each way is a
//! big-endian u16 length and the payload. The request named one target,
//! so a packet carries no address: sealing ignores the one it is given,
//! and every reply is from the request's target: a VLESS sub-link
//! carries one target.

use std::io;
use std::ops::Range;

use super::ResponseHeader;
use crate::codec::{DatagramCodec, Packet};
use crate::Address;

/// The framing of one UDP request's stream.
pub struct UdpFraming {
    target: Address,
    /// No response header is (any longer) in front of the next packet:
    /// the client's view has one before the first reply, the server's none.
    header_skipped: bool,
}

impl UdpFraming {
    /// The framing of a request to `target`, the peer every reply is from.
    pub fn new(target: Address) -> Self {
        UdpFraming {
            target,
            header_skipped: false,
        }
    }

    /// The server's framing of a request to `target`: the client's packets
    /// follow its request with no header, each bound for `target`, and the
    /// response header in front of the replies is the request's to stage
    /// (`on_connected`), so every reply is one packet.
    pub fn server(target: Address) -> Self {
        UdpFraming {
            target,
            header_skipped: true,
        }
    }
}

impl DatagramCodec for UdpFraming {
    const HEADROOM: usize = 2;
    const TAILROOM: usize = 0;

    fn seal_to(&mut self, buf: &mut [u8], len: usize, _to: &Address) -> io::Result<Range<usize>> {
        let Ok(prefix) = u16::try_from(len) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "vless: a udp packet longer than 65535 bytes",
            ));
        };
        if buf.len() < Self::HEADROOM + len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "frame larger than the client runtime's buffer",
            ));
        }
        buf[..2].copy_from_slice(&prefix.to_be_bytes());
        Ok(0..2 + len)
    }

    fn open_from(&mut self, buf: &mut [u8]) -> io::Result<Option<Packet>> {
        let header = if self.header_skipped {
            0
        } else {
            match ResponseHeader::whole_len(buf)? {
                Some(len) => len,
                None => return Ok(None),
            }
        };
        let Some(prefix) = buf.get(header..header + 2) else {
            return Ok(None);
        };
        let len = usize::from(u16::from_be_bytes([prefix[0], prefix[1]]));
        let start = header + 2;
        if buf.len() < start + len {
            return Ok(None);
        }
        self.header_skipped = true;
        Ok(Some(Packet {
            consumed: start + len,
            peer: self.target.clone(),
            payload: start..start + len,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framing() -> UdpFraming {
        UdpFraming::new(Address::Ip("192.0.2.1:53".parse().unwrap()))
    }

    #[test]
    fn a_packet_is_sealed_behind_its_length_whatever_address_it_names() {
        let mut codec = framing();
        let mut buf = *b"..query";
        let other = Address::Domain("elsewhere.example".into(), 9);
        let range = codec.seal_to(&mut buf, 5, &other).unwrap();
        assert_eq!(&buf[range], b"\x00\x05query");
    }

    #[test]
    fn replies_split_at_every_byte_open_once_whole_from_the_target() {
        // A header with one addons byte, then two packets.
        let wire = b"\x00\x01z\x00\x06answer\x00\x02hi";
        let first_end = 3 + 2 + 6;
        for cut in 0..first_end {
            let mut part = wire[..cut].to_vec();
            assert_eq!(
                framing().open_from(&mut part).unwrap(),
                None,
                "cut at {cut}"
            );
        }
        let mut codec = framing();
        let mut all = wire.to_vec();
        assert_eq!(codec.open_from(&mut all[..first_end - 1]).unwrap(), None);
        let packet = codec.open_from(&mut all).unwrap().unwrap();
        assert_eq!(packet.peer, Address::Ip("192.0.2.1:53".parse().unwrap()));
        assert_eq!(
            (&all[packet.payload.clone()], packet.consumed),
            (&b"answer"[..], first_end)
        );
        let mut rest = all[packet.consumed..].to_vec();
        assert_eq!(codec.open_from(&mut rest[..3]).unwrap(), None);
        let second = codec.open_from(&mut rest).unwrap().unwrap();
        assert_eq!((&rest[second.payload], second.consumed), (&b"hi"[..], 4));
    }

    #[test]
    fn a_payload_longer_than_the_prefix_can_say_is_refused() {
        let mut codec = framing();
        let mut buf = vec![0u8; 2 + 65536];
        let to = Address::Ip("192.0.2.1:53".parse().unwrap());
        let e = codec.seal_to(&mut buf, 65536, &to).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(codec.seal_to(&mut buf, 65535, &to).is_ok());
    }

    #[test]
    fn a_reply_with_another_version_fails_the_stream() {
        let mut codec = framing();
        let mut buf = b"\x07\x00\x00\x01x".to_vec();
        assert!(codec.open_from(&mut buf).is_err());
    }
}
