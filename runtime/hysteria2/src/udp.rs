//! The UDPMessage that carries every datagram over QUIC datagrams
//! (PROTOCOL.md, "UDP"), its fragmentation, and the reassembly of
//! fragments with bounded memory: one packet in progress per session, as
//! hysteria's own defragger keeps.

use bytes::BufMut;

use crate::varint;

/// Session id, packet id, fragment id and fragment count.
const FIXED: usize = 8;
/// The longest address a message may carry, as for a TCPRequest.
pub const MAX_ADDRESS_LEN: usize = crate::tcp::MAX_ADDRESS_LEN as usize;
/// The largest packet reassembly holds: a UDP datagram's largest payload.
pub const MAX_PACKET: usize = 65_535;

/// One UDPMessage, borrowed from the datagram it was parsed from.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Message<'a> {
    pub session_id: u32,
    pub packet_id: u16,
    pub frag_id: u8,
    pub frag_count: u8,
    /// `host:port`.
    pub address: &'a str,
    pub payload: &'a [u8],
}

/// The header's length for an address of `address_len` bytes.
pub fn header_len(address_len: usize) -> usize {
    FIXED + varint::len(address_len as u64) + address_len
}

/// Parses one datagram; `None` for one that is malformed (too short, an
/// empty or oversized address, a fragment id past the count).
pub fn parse(datagram: &[u8]) -> Option<Message<'_>> {
    let fixed = datagram.get(..FIXED)?;
    let (len, n) = varint::read(&datagram[FIXED..])?;
    let len = usize::try_from(len).ok()?;
    if len == 0 || len > MAX_ADDRESS_LEN {
        return None;
    }
    let start = FIXED + n;
    let address = std::str::from_utf8(datagram.get(start..start + len)?).ok()?;
    let message = Message {
        session_id: u32::from_be_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]),
        packet_id: u16::from_be_bytes([fixed[4], fixed[5]]),
        frag_id: fixed[6],
        frag_count: fixed[7],
        address,
        payload: &datagram[start + len..],
    };
    (message.frag_id < message.frag_count).then_some(message)
}

/// Appends `message` to `out`.
pub fn encode(message: &Message<'_>, out: &mut impl BufMut) {
    out.put_u32(message.session_id);
    out.put_u16(message.packet_id);
    out.put_u8(message.frag_id);
    out.put_u8(message.frag_count);
    let mut len = [0u8; 8];
    let n = varint::write(&mut len, message.address.len() as u64).unwrap_or(0);
    out.put_slice(&len[..n]);
    out.put_slice(message.address.as_bytes());
    out.put_slice(message.payload);
}

/// How a payload is cut to fit datagrams of at most `max_datagram` bytes:
/// the payload bytes each fragment carries and the fragment count, or
/// `None` when it cannot be sent (the header alone does not fit, or more
/// than 255 fragments would be needed): the packet is dropped, as UDP
/// drops what it cannot carry.
pub fn fragments(
    address_len: usize,
    payload_len: usize,
    max_datagram: usize,
) -> Option<(usize, u8)> {
    let header = header_len(address_len);
    let chunk = max_datagram.checked_sub(header).filter(|c| *c > 0)?;
    if payload_len <= chunk {
        return Some((chunk, 1));
    }
    let count = payload_len.div_ceil(chunk);
    Some((chunk, u8::try_from(count).ok()?))
}

/// Reassembles the fragmented packets of one session. It holds one packet
/// at a time: a fragment of another packet id starts over, so memory stays
/// at most [`MAX_PACKET`] twice per session whatever a peer sends.
#[derive(Default)]
pub struct Defragger {
    packet_id: u16,
    count: u8,
    received: u8,
    /// Where each fragment's payload sits in `data`; `None` until it came.
    parts: Vec<Option<(u32, u32)>>,
    data: Vec<u8>,
    address: String,
    whole: Vec<u8>,
}

impl Defragger {
    /// Takes one fragment; returns the packet's address and payload once
    /// its last fragment has arrived. An unfragmented message passes
    /// through without a copy.
    pub fn push<'a>(&'a mut self, message: &Message<'a>) -> Option<(&'a str, &'a [u8])> {
        if message.frag_count <= 1 {
            return Some((message.address, message.payload));
        }
        if self.count == 0
            || message.packet_id != self.packet_id
            || message.frag_count != self.count
        {
            self.packet_id = message.packet_id;
            self.count = message.frag_count;
            self.received = 0;
            self.parts.clear();
            self.parts.resize(usize::from(message.frag_count), None);
            self.data.clear();
            self.address.clear();
            self.address.push_str(message.address);
        }
        let slot = self.parts.get_mut(usize::from(message.frag_id))?;
        if slot.is_some() {
            return None;
        }
        if self.data.len() + message.payload.len() > MAX_PACKET {
            self.count = 0;
            return None;
        }
        *slot = Some((self.data.len() as u32, message.payload.len() as u32));
        self.data.extend_from_slice(message.payload);
        self.received += 1;
        if self.received < self.count {
            return None;
        }
        self.whole.clear();
        for (start, len) in self.parts.iter().flatten() {
            let start = *start as usize;
            self.whole
                .extend_from_slice(&self.data[start..start + *len as usize]);
        }
        self.count = 0;
        Some((&self.address, &self.whole))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message<'a>(packet_id: u16, frag_id: u8, frag_count: u8, payload: &'a [u8]) -> Message<'a> {
        Message {
            session_id: 7,
            packet_id,
            frag_id,
            frag_count,
            address: "1.2.3.4:53",
            payload,
        }
    }

    #[test]
    fn a_message_round_trips_and_malformed_ones_are_dropped() {
        let mut wire = Vec::new();
        encode(&message(9, 1, 3, b"abc"), &mut wire);
        assert_eq!(wire.len(), header_len(10) + 3);
        assert_eq!(parse(&wire), Some(message(9, 1, 3, b"abc")));
        assert_eq!(parse(&wire[..9]), None);
        let mut past = Vec::new();
        encode(&message(9, 3, 3, b"abc"), &mut past);
        assert_eq!(parse(&past), None);
        let mut empty = Vec::new();
        encode(
            &Message {
                address: "",
                ..message(0, 0, 1, b"")
            },
            &mut empty,
        );
        assert_eq!(parse(&empty), None);
    }

    #[test]
    fn fragments_fit_the_datagram_and_cap_at_255() {
        let header = header_len(10);
        assert_eq!(fragments(10, 100, header + 100), Some((100, 1)));
        assert_eq!(fragments(10, 101, header + 100), Some((100, 2)));
        assert_eq!(fragments(10, 25_500, header + 100), Some((100, 255)));
        assert_eq!(fragments(10, 25_501, header + 100), None);
        assert_eq!(fragments(10, 1, header), None);
    }

    #[test]
    fn fragments_reassemble_in_any_order() {
        let payload: Vec<u8> = (0..250u8).collect();
        let (chunk, count) = fragments(10, payload.len(), header_len(10) + 100).unwrap();
        let parts: Vec<&[u8]> = payload.chunks(chunk).collect();
        assert_eq!(parts.len(), usize::from(count));
        let mut defragger = Defragger::default();
        assert_eq!(defragger.push(&message(5, 2, count, parts[2])), None);
        assert_eq!(defragger.push(&message(5, 0, count, parts[0])), None);
        let (address, whole) = defragger.push(&message(5, 1, count, parts[1])).unwrap();
        assert_eq!(address, "1.2.3.4:53");
        assert_eq!(whole, &payload[..]);
    }

    #[test]
    fn a_lost_fragment_drops_its_packet_and_the_next_packet_still_arrives() {
        let mut defragger = Defragger::default();
        assert_eq!(defragger.push(&message(1, 0, 2, b"lost-")), None);
        assert_eq!(defragger.push(&message(2, 0, 2, b"he")), None);
        assert_eq!(
            defragger.push(&message(2, 0, 2, b"he")),
            None,
            "a duplicate is ignored"
        );
        let (_, whole) = defragger.push(&message(2, 1, 2, b"llo")).unwrap();
        assert_eq!(whole, b"hello");
        assert_eq!(defragger.push(&message(1, 1, 2, b"late")), None);
        let (_, single) = defragger.push(&message(3, 0, 1, b"one")).unwrap();
        assert_eq!(single, b"one");
    }

    #[test]
    fn reassembly_never_holds_more_than_one_packet() {
        let big = vec![0u8; 40_000];
        let mut defragger = Defragger::default();
        assert_eq!(defragger.push(&message(1, 0, 3, &big)), None);
        assert_eq!(
            defragger.push(&message(1, 1, 3, &big)),
            None,
            "past MAX_PACKET: dropped"
        );
        assert_eq!(defragger.push(&message(1, 2, 3, b"x")), None);
        assert!(defragger.data.capacity() <= 2 * MAX_PACKET);
    }
}
