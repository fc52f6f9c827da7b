//! The client's stream codec: the handshake writes our salt and the sealed
//! destination at dial and the stream is open at once (the server answers
//! nothing before the payload); then every write is a chunk, and what the
//! server sends is its salt and its chunks.

use std::io;
use std::ops::Range;

use super::{Incoming, Outgoing, MAX_ADDRESS_LEN, MAX_SALT_LEN};
use crate::aead::{self, MasterKey, MAX_CHUNK_LEN, RECORD_OVERHEAD, RESERVE, TAG_LEN};
use crate::codec::{ClientCodec, ClientStep, Opened, StreamCodec};
use crate::socks::{address_len, put_address};
use crate::Address;

/// One client flow: what it seals toward the server and what it opens from
/// it. The header chunk and the payload chunks share one sealer, so their
/// nonces run on.
pub struct SsStream {
    outgoing: Outgoing,
    incoming: Incoming,
    /// The destination, until the handshake has sealed it.
    destination: Option<Address>,
}

impl SsStream {
    /// The client runtime's buffer each way: the salt and one chunk of
    /// MAX_PAYLOAD with its overhead (16,449 bytes), with room to spare.
    pub const BUF_SIZE: usize = 20 * 1024;

    /// A flow to `destination` under a fresh random salt.
    pub fn new(master: &MasterKey, destination: &Address) -> io::Result<SsStream> {
        Ok(SsStream::starting(
            Outgoing::random(master)?,
            master,
            destination,
        ))
    }

    /// The same under `salt`, for tests and vectors.
    pub fn with_salt(
        master: &MasterKey,
        salt: &[u8],
        destination: &Address,
    ) -> io::Result<SsStream> {
        Ok(SsStream::starting(
            Outgoing::with_salt(master, salt)?,
            master,
            destination,
        ))
    }

    fn starting(outgoing: Outgoing, master: &MasterKey, destination: &Address) -> SsStream {
        SsStream {
            outgoing,
            incoming: Incoming::new(master.clone()),
            destination: Some(destination.clone()),
        }
    }
}

// The read buffer holds the server's salt and its longest chunk at once.
const _: () = assert!(SsStream::BUF_SIZE > MAX_SALT_LEN + MAX_CHUNK_LEN);

impl ClientCodec for SsStream {
    type Reply = ();

    /// The salt, one chunk's overhead and the longest address (325 bytes),
    /// with 61 bytes to spare, 386 in all: 32 + 34 + 259 + 61.
    const STAGING_RESERVE: usize = MAX_SALT_LEN + RECORD_OVERHEAD + MAX_ADDRESS_LEN + 61;

    /// Appends the salt and the destination's chunk; the stream is open.
    fn start(&mut self, out: &mut Vec<u8>) -> io::Result<ClientStep<()>> {
        let Some(destination) = self.destination.take() else {
            return Ok(ClientStep::Open(()));
        };
        let begin = out.len();
        out.extend_from_slice(self.outgoing.salt());
        let chunk = out.len();
        let len = address_len(&destination);
        out.resize(chunk + RESERVE + len + TAG_LEN, 0);
        put_address(
            &destination,
            &mut out[chunk + RESERVE..chunk + RESERVE + len],
        );
        if let Err(e) = self.outgoing.seal(&mut out[chunk..], len) {
            out.truncate(begin);
            return Err(e);
        }
        Ok(ClientStep::Open(()))
    }
}

impl StreamCodec for SsStream {
    const HEADROOM: usize = RESERVE;
    const TAILROOM: usize = TAG_LEN;
    const MAX_PAYLOAD: usize = aead::MAX_PAYLOAD;

    fn seal(&mut self, buf: &mut [u8], len: usize) -> io::Result<Range<usize>> {
        self.outgoing.seal(buf, len)
    }

    fn open(&mut self, buf: &mut [u8]) -> io::Result<Opened> {
        self.incoming.open(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aead::Algorithm;
    use crate::shadowsocks::tests::{hex, ALGORITHMS};
    use crate::socks::read_address;

    fn master(algorithm: Algorithm, password: &str) -> MasterKey {
        MasterKey::from_password(algorithm, password.as_bytes())
    }

    /// The payloads of the frames `open` finds in `wire`, its bytes
    /// arriving in pieces cut at `cuts`, as a reader's buffer of unconsumed
    /// bytes would present them.
    fn frames(
        mut open: impl FnMut(&mut [u8]) -> io::Result<Opened>,
        wire: &[u8],
        cuts: &[usize],
    ) -> io::Result<Vec<Vec<u8>>> {
        let mut found = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let ends = cuts.iter().copied().chain([wire.len()]);
        let mut arrived = 0;
        for end in ends {
            pending.extend_from_slice(&wire[arrived..end]);
            arrived = end;
            let mut at = 0;
            while let Opened::Frame { consumed, payload } = open(&mut pending[at..])? {
                found.push(pending[at..][payload].to_vec());
                at += consumed;
            }
            pending.drain(..at);
        }
        assert!(pending.is_empty(), "{} bytes left unopened", pending.len());
        Ok(found)
    }

    /// What a client sends: the handshake, then each payload as a write.
    fn client_wire(client: &mut SsStream, payloads: &[&[u8]]) -> Vec<u8> {
        let mut wire = Vec::new();
        assert_eq!(client.start(&mut wire).unwrap(), ClientStep::Open(()));
        assert!(wire.len() <= SsStream::STAGING_RESERVE);
        for payload in payloads {
            let mut buf = vec![0; RESERVE + payload.len() + TAG_LEN];
            buf[RESERVE..RESERVE + payload.len()].copy_from_slice(payload);
            let sealed = StreamCodec::seal(client, &mut buf, payload.len()).unwrap();
            wire.extend_from_slice(&buf[sealed]);
        }
        wire
    }

    /// Two chunks, the address 127.0.0.1:8080 and "hello", under password
    /// "barfoo!" and salt 00 01 02 ..., sealed by Python's `cryptography`
    /// (OpenSSL) with hashlib's MD5 and its HKDF-SHA1.
    const REFERENCE: [(Algorithm, &str); 3] = [
        (
            Algorithm::Aes128Gcm,
            "000102030405060708090a0b0c0d0e0f6f534c11790bd24c8ee311a20dceab75
             37f581bf5309bf7cd5caeb8f5e13451750cdacf4f7e54cd17327e92ec69375a1
             334ffb5881d3b0afa701893a076e19b7d21c08053bc0ce661fcb9ad66e4017b7",
        ),
        (
            Algorithm::Aes256Gcm,
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
             fe30642f891219579abfa3a9168624b5b3c9dfefa0636df86312fb18e6e4d3b6
             0cfe676b15a2e86f95e4cb83912b0f3cb7704ad7f9002ca02cef05fcce5426fd
             abb6f865410f0f516854eb8b81c5c883",
        ),
        (
            Algorithm::ChaCha20Poly1305,
            "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
             a028e26a37d380da864869a42f60c5541cb14fcd028d5480fb3ef8bfa553a8a0
             9d8e12287cd034e5b2ed4af8f46108674e93e32cd112ae4d7db5587bacef2f52
             3ae4dac8f735283d4bd3c37b15027593",
        ),
    ];

    #[test]
    fn the_client_stream_is_byte_for_byte_what_python_cryptography_seals() {
        let destination = Address::Ip("127.0.0.1:8080".parse().unwrap());
        for (algorithm, wire) in REFERENCE {
            let master = master(algorithm, "barfoo!");
            let salt: Vec<u8> = (0..master.salt_len() as u8).collect();
            let mut client = SsStream::with_salt(&master, &salt, &destination).unwrap();
            assert_eq!(
                client_wire(&mut client, &[b"hello"]),
                hex(wire),
                "{algorithm:?}"
            );
        }
    }

    #[test]
    fn a_server_built_from_the_same_halves_opens_the_client_split_at_every_byte() {
        let destination = Address::Domain("example.com".into(), 443);
        for algorithm in ALGORITHMS {
            let master = master(algorithm, "secret");
            let mut client = SsStream::new(&master, &destination).unwrap();
            let wire = client_wire(&mut client, &[b"GET / HTTP/1.1\r\n", b"\r\n"]);
            for cut in 0..=wire.len() {
                let mut server = Incoming::new(master.clone());
                let found = frames(|buf| server.open(buf), &wire, &[cut]).unwrap();
                let [salt, header, first, second] = &found[..] else {
                    panic!("{algorithm:?} cut at {cut}: {} frames", found.len());
                };
                assert!(salt.is_empty());
                let (to, used) = read_address(header).unwrap().unwrap();
                assert_eq!((to, used), (destination.clone(), header.len()));
                assert_eq!(
                    (&first[..], &second[..]),
                    (&b"GET / HTTP/1.1\r\n"[..], &b"\r\n"[..])
                );
            }
        }
    }

    #[test]
    fn the_client_opens_what_a_server_seals_split_at_every_byte() {
        for algorithm in ALGORITHMS {
            let master = master(algorithm, "secret");
            let mut server = Outgoing::random(&master).unwrap();
            let mut wire = server.salt().to_vec();
            for payload in [&b"HTTP/1.1 200 OK\r\n"[..], b"x"] {
                let mut buf = vec![0; RECORD_OVERHEAD + payload.len()];
                buf[RESERVE..RESERVE + payload.len()].copy_from_slice(payload);
                let sealed = server.seal(&mut buf, payload.len()).unwrap();
                wire.extend_from_slice(&buf[sealed]);
            }
            for cut in 0..=wire.len() {
                let destination = Address::Ip("192.0.2.1:80".parse().unwrap());
                let mut client = SsStream::new(&master, &destination).unwrap();
                let found = frames(|buf| client.open(buf), &wire, &[cut]).unwrap();
                assert_eq!(
                    found,
                    [&b""[..], b"HTTP/1.1 200 OK\r\n", b"x"],
                    "{algorithm:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn a_stream_fed_one_byte_at_a_time_opens_whole() {
        let master = master(Algorithm::Aes256Gcm, "secret");
        let destination = Address::Ip("[2001:db8::1]:443".parse().unwrap());
        let long = vec![0x5a; aead::MAX_PAYLOAD];
        let mut client = SsStream::new(&master, &destination).unwrap();
        let wire = client_wire(&mut client, &[&long, b"tail"]);
        let cuts: Vec<usize> = (1..wire.len()).collect();
        let mut server = Incoming::new(master);
        let found = frames(|buf| server.open(buf), &wire, &cuts).unwrap();
        assert_eq!(found.len(), 4);
        assert!(found[2] == long && found[3] == b"tail");
    }

    #[test]
    fn a_wrong_password_fails_the_first_chunk_either_way() {
        let destination = Address::Ip("127.0.0.1:80".parse().unwrap());
        for algorithm in ALGORITHMS {
            let mut client = SsStream::new(&master(algorithm, "right"), &destination).unwrap();
            let wire = client_wire(&mut client, &[b"data"]);
            let mut server = Incoming::new(master(algorithm, "wrong"));
            let e = frames(|buf| server.open(buf), &wire, &[]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{algorithm:?}");

            let mut server = Outgoing::random(&master(algorithm, "right")).unwrap();
            let mut wire = server.salt().to_vec();
            let mut buf = [0; RECORD_OVERHEAD + 2];
            let sealed = server.seal(&mut buf, 2).unwrap();
            wire.extend_from_slice(&buf[sealed]);
            let mut client = SsStream::new(&master(algorithm, "wrong"), &destination).unwrap();
            let e = frames(|buf| client.open(buf), &wire, &[]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{algorithm:?}");
        }
    }

    #[test]
    fn the_buffers_hold_the_longest_header_and_the_longest_chunk() {
        let master = master(Algorithm::ChaCha20Poly1305, "secret");
        let destination = Address::Domain("a".repeat(255), 65535);
        let mut client = SsStream::new(&master, &destination).unwrap();
        let mut out = Vec::new();
        assert_eq!(client.start(&mut out).unwrap(), ClientStep::Open(()));
        assert_eq!(out.len(), 32 + RECORD_OVERHEAD + MAX_ADDRESS_LEN);
        assert_eq!(SsStream::STAGING_RESERVE, 386);
    }

    #[test]
    fn a_salt_of_the_wrong_length_is_refused() {
        let master = master(Algorithm::Aes128Gcm, "secret");
        let destination = Address::Ip("127.0.0.1:80".parse().unwrap());
        let e = SsStream::with_salt(&master, &[0; 32], &destination)
            .err()
            .unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
