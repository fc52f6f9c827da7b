//! Shadowsocks AEAD UDP, the format shadowsocks-libev, shadowsocks-rust,
//! sing-box and Xray speak: each packet is
//! `[salt][sealed(ATYP addr port payload)][tag]`, a random salt of its own,
//! the session key of that salt, nonce zero. The address is the destination
//! toward the server and the source on the way back, so one codec serves
//! both ends.

use std::io;
use std::ops::Range;

use super::{random_salt, MAX_ADDRESS_LEN, MAX_SALT_LEN};
use crate::aead::{MasterKey, Nonce, TAG_LEN};
use crate::codec::{DatagramCodec, Packet};
use crate::socks::{address_len, put_address, read_address};
use crate::Address;

/// Seals and opens packets under one master key. Holds no per-packet state.
pub struct SsDatagram {
    master: MasterKey,
}

fn short() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "shadowsocks: udp packet shorter than its salt and tag",
    )
}

impl SsDatagram {
    pub fn new(master: MasterKey) -> SsDatagram {
        SsDatagram { master }
    }

    /// [`DatagramCodec::seal_to`] under a given `salt`, as long as the
    /// method's key.
    pub fn seal_with_salt(
        &self,
        buf: &mut [u8],
        len: usize,
        to: &Address,
        salt: &[u8],
    ) -> io::Result<Range<usize>> {
        seal(&self.master, buf, len, to, salt)
    }
}

/// The most a packet puts before its payload: the longest salt and the
/// longest address.
pub const HEADROOM: usize = MAX_SALT_LEN + MAX_ADDRESS_LEN;
/// What a packet puts after its payload: the tag.
pub const TAILROOM: usize = TAG_LEN;

/// Seals the `len` payload bytes at `buf[HEADROOM..HEADROOM + len]` under
/// `salt`, naming `peer` (the destination toward a server, the source back
/// from it), where they lie; returns the range of `buf` the packet occupies.
pub(super) fn seal(
    master: &MasterKey,
    buf: &mut [u8],
    len: usize,
    peer: &Address,
    salt: &[u8],
) -> io::Result<Range<usize>> {
    let salt_len = master.salt_len();
    if salt.len() != salt_len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "shadowsocks: the salt's length does not match the method",
        ));
    }
    let address = address_len(peer);
    let start = HEADROOM - address - salt_len;
    let end = HEADROOM + len + TAG_LEN;
    let packet = buf.get_mut(start..end).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "frame larger than the client runtime's buffer",
        )
    })?;
    let (head, sealed) = packet.split_at_mut(salt_len);
    head.copy_from_slice(salt);
    put_address(peer, &mut sealed[..address]);
    master
        .packet_key(salt)?
        .seal_in_place(&Nonce::ZERO, &[], sealed)?;
    Ok(start..end)
}

/// [`seal`] under a fresh random salt.
pub(super) fn seal_fresh(
    master: &MasterKey,
    buf: &mut [u8],
    len: usize,
    peer: &Address,
) -> io::Result<Range<usize>> {
    let mut salt = [0; MAX_SALT_LEN];
    let salt = &mut salt[..master.salt_len()];
    random_salt(salt)?;
    seal(master, buf, len, peer, salt)
}

/// Opens the whole of `buf` as one packet, in place. A packet never needs
/// more bytes: one too short or unauthentic is an error, for the caller to
/// drop.
pub(super) fn open(master: &MasterKey, buf: &mut [u8]) -> io::Result<Packet> {
    let salt_len = master.salt_len();
    if buf.len() < salt_len + TAG_LEN {
        return Err(short());
    }
    let (salt, sealed) = buf.split_at_mut(salt_len);
    let opened = master
        .packet_key(salt)?
        .open_in_place(&Nonce::ZERO, &[], sealed)?;
    let (peer, used) = match read_address(&sealed[..opened]) {
        Ok(Some(found)) => found,
        Ok(None) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "shadowsocks: udp packet shorter than its address",
            ))
        }
        Err(reason) => return Err(io::Error::new(io::ErrorKind::InvalidData, reason)),
    };
    Ok(Packet {
        consumed: buf.len(),
        peer,
        payload: salt_len + used..salt_len + opened,
    })
}

impl DatagramCodec for SsDatagram {
    const HEADROOM: usize = HEADROOM;
    const TAILROOM: usize = TAILROOM;

    fn seal_to(&mut self, buf: &mut [u8], len: usize, to: &Address) -> io::Result<Range<usize>> {
        seal_fresh(&self.master, buf, len, to)
    }

    /// Opens the whole of `buf` as one packet. A packet never needs more
    /// bytes: one too short or unauthentic is an error, for the caller to
    /// drop.
    fn open_from(&mut self, buf: &mut [u8]) -> io::Result<Option<Packet>> {
        open(&self.master, buf).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aead::Algorithm;
    use crate::shadowsocks::tests::{hex, ALGORITHMS};

    const HEADROOM: usize = SsDatagram::HEADROOM;

    fn codec(algorithm: Algorithm, password: &str) -> SsDatagram {
        SsDatagram::new(MasterKey::from_password(algorithm, password.as_bytes()))
    }

    /// `payload` behind the headroom, with room for the tag.
    fn staged(payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0; HEADROOM + payload.len() + TAG_LEN];
        buf[HEADROOM..HEADROOM + payload.len()].copy_from_slice(payload);
        buf
    }

    /// "hello" from example.com:53 under password "barfoo!" and salt
    /// 40 41 42 ..., sealed by Python's `cryptography` (OpenSSL).
    const REFERENCE: [(Algorithm, &str); 3] = [
        (
            Algorithm::Aes128Gcm,
            "404142434445464748494a4b4c4d4e4fe99d6e38167d21c26dfb016e358ce05a
             51abb67a114536f41c673e2b878082d3a89f401b",
        ),
        (
            Algorithm::Aes256Gcm,
            "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f
             e819172da9a54062eb89bd275837240f6e6d1729bb9d9f588712700b8fabfd90
             f55a1a88",
        ),
        (
            Algorithm::ChaCha20Poly1305,
            "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f
             9382655dd9e4da1efa51441ffb2e7c338bd195fe5b3e2468dccceea1299d3c55
             0e1b2a84",
        ),
    ];

    #[test]
    fn a_packet_is_byte_for_byte_what_python_cryptography_seals_and_opens_back() {
        let peer = Address::Domain("example.com".into(), 53);
        for (algorithm, wire) in REFERENCE {
            let mut codec = codec(algorithm, "barfoo!");
            let salt: Vec<u8> = (0x40..0x40 + algorithm.key_len() as u8).collect();
            let mut buf = staged(b"hello");
            let sealed = codec.seal_with_salt(&mut buf, 5, &peer, &salt).unwrap();
            assert_eq!(buf[sealed.clone()], hex(wire), "{algorithm:?}");
            assert_eq!(sealed.end, buf.len());

            let mut wire = hex(wire);
            let packet = codec.open_from(&mut wire).unwrap().unwrap();
            assert_eq!(packet.consumed, wire.len());
            assert_eq!(packet.peer, peer);
            assert_eq!(&wire[packet.payload], b"hello");
        }
    }

    #[test]
    fn every_address_type_round_trips_under_a_salt_of_its_own() {
        for algorithm in ALGORITHMS {
            let mut client = codec(algorithm, "secret");
            let mut server = codec(algorithm, "secret");
            let mut salts = Vec::new();
            for peer in [
                Address::Ip("192.0.2.1:53".parse().unwrap()),
                Address::Ip("[2001:db8::1]:5353".parse().unwrap()),
                Address::Domain("dns.example".into(), 53),
                Address::Domain(
                    format!("{0}.{0}.{0}.{1}", "a".repeat(63), "b".repeat(61)),
                    1,
                ),
            ] {
                for payload in [&b""[..], b"q", &[0xa5; 1400]] {
                    let mut buf = staged(payload);
                    let sealed = client.seal_to(&mut buf, payload.len(), &peer).unwrap();
                    let salt_len = algorithm.key_len();
                    salts.push(buf[sealed.start..sealed.start + salt_len].to_vec());
                    let mut wire = buf[sealed].to_vec();
                    let packet = server.open_from(&mut wire).unwrap().unwrap();
                    assert_eq!(packet.peer, peer, "{algorithm:?}");
                    assert_eq!(&wire[packet.payload], payload);
                }
            }
            salts.sort();
            salts.dedup();
            assert_eq!(salts.len(), 12, "every packet has a salt of its own");
        }
    }

    #[test]
    fn a_wrong_password_a_flipped_bit_and_a_short_packet_are_refused() {
        let peer = Address::Ip("127.0.0.1:53".parse().unwrap());
        for algorithm in ALGORITHMS {
            let mut client = codec(algorithm, "right");
            let mut buf = staged(b"query");
            let sealed = client.seal_to(&mut buf, 5, &peer).unwrap();
            let wire = buf[sealed].to_vec();

            let e = codec(algorithm, "wrong")
                .open_from(&mut wire.clone())
                .unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{algorithm:?}");
            for byte in 0..wire.len() {
                let mut bent = wire.clone();
                bent[byte] ^= 0x10;
                assert!(
                    client.open_from(&mut bent).is_err(),
                    "{algorithm:?} byte {byte}"
                );
            }
            let mut cut = wire[..algorithm.key_len() + TAG_LEN - 1].to_vec();
            let e = client.open_from(&mut cut).unwrap_err();
            assert_eq!(
                e.to_string(),
                "shadowsocks: udp packet shorter than its salt and tag"
            );
        }
    }

    #[test]
    fn a_packet_whose_address_is_cut_short_is_refused() {
        let mut codec = codec(Algorithm::Aes128Gcm, "secret");
        let salt = [7; 16];
        // An IPv4 address type with two of its six bytes, sealed properly.
        let mut wire = salt.to_vec();
        wire.extend_from_slice(&[1, 127, 0]);
        wire.extend_from_slice(&[0; TAG_LEN]);
        let key = codec.master.packet_key(&salt).unwrap();
        key.seal_in_place(&Nonce::ZERO, &[], &mut wire[16..])
            .unwrap();
        let e = codec.open_from(&mut wire).unwrap_err();
        assert_eq!(
            e.to_string(),
            "shadowsocks: udp packet shorter than its address"
        );
    }

    #[test]
    fn a_payload_that_does_not_fit_the_buffer_is_refused() {
        let mut codec = codec(Algorithm::Aes256Gcm, "secret");
        let peer = Address::Ip("127.0.0.1:53".parse().unwrap());
        let mut buf = vec![0; HEADROOM + 10];
        let e = codec.seal_to(&mut buf, 10, &peer).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "frame larger than the client runtime's buffer"
        );
    }
}
