//! AEAD throughput of the candidate crypto libraries, and of the chunk
//! framing built on the one we kept.
//!
//! `cargo bench -p etemenanki-proto --bench aead` prints MB/s (10^6 bytes a
//! second) for sealing and opening 16 KiB and 1.4 KiB messages with each
//! method in OpenSSL (the `openssl` crate), ring, aws-lc-rs and RustCrypto
//! (`aes-gcm`, `chacha20poly1305`), each with its key schedule built once, as
//! the runtime does; then the cost of one sealed 2-byte length record, which
//! every Shadowsocks chunk pays once more, and of building a key schedule,
//! which a Shadowsocks AEAD UDP packet pays; then whole chunks through
//! `ChunkSealer` and `ChunkOpener`. Every figure is the best of a few short
//! rounds, so the whole run takes under half a minute.
//!
//! Opening needs the ciphertext back after each open, so every open round
//! copies the sealed message into place first, for every candidate alike.

use std::hint::black_box;
use std::time::{Duration, Instant};

use etemenanki_proto::aead::{
    Algorithm, ChunkOpener, ChunkSealer, Nonce, Opened, PacketKey, SessionKey, MAX_PAYLOAD,
    RESERVE, TAG_LEN,
};

const ROUNDS: usize = 10;
const ROUND: Duration = Duration::from_millis(30);
const SIZES: [(usize, &str); 2] = [(16 * 1024, "16 KiB"), (1400, "1.4 KiB")];

/// One library's AEAD for one method, keyed once. `buf` is the message
/// followed by TAG_LEN bytes for the tag.
trait Candidate {
    fn seal(&mut self, nonce: &[u8; 12], buf: &mut [u8]);
    fn open(&mut self, nonce: &[u8; 12], buf: &mut [u8]) -> bool;
}

mod openssl_candidate {
    use openssl::cipher::{Cipher, CipherRef};
    use openssl::cipher_ctx::CipherCtx;

    use super::{Algorithm, TAG_LEN};

    /// One context a direction, so neither re-expands the key per message.
    pub struct Openssl {
        seal: CipherCtx,
        open: CipherCtx,
    }

    impl Openssl {
        pub fn new(algorithm: Algorithm, key: &[u8]) -> Self {
            let cipher: &CipherRef = match algorithm {
                Algorithm::Aes128Gcm => Cipher::aes_128_gcm(),
                Algorithm::Aes256Gcm => Cipher::aes_256_gcm(),
                Algorithm::ChaCha20Poly1305 => Cipher::chacha20_poly1305(),
            };
            let mut seal = CipherCtx::new().unwrap();
            seal.encrypt_init(Some(cipher), Some(key), None).unwrap();
            let mut open = CipherCtx::new().unwrap();
            open.decrypt_init(Some(cipher), Some(key), None).unwrap();
            Self { seal, open }
        }
    }

    impl super::Candidate for Openssl {
        fn seal(&mut self, nonce: &[u8; 12], buf: &mut [u8]) {
            let (data, tag) = buf.split_at_mut(buf.len() - TAG_LEN);
            self.seal.encrypt_init(None, None, Some(nonce)).unwrap();
            let n = data.len();
            self.seal.cipher_update_inplace(data, n).unwrap();
            self.seal.cipher_final(&mut []).unwrap();
            self.seal.tag(tag).unwrap();
        }

        fn open(&mut self, nonce: &[u8; 12], buf: &mut [u8]) -> bool {
            let (data, tag) = buf.split_at_mut(buf.len() - TAG_LEN);
            self.open.decrypt_init(None, None, Some(nonce)).unwrap();
            let n = data.len();
            self.open.cipher_update_inplace(data, n).unwrap();
            self.open.set_tag(tag).unwrap();
            self.open.cipher_final(&mut []).is_ok()
        }
    }
}

/// aws-lc-rs and ring are measured as the crate uses them: its
/// `SessionKey` is aws-lc-rs's, its `PacketKey` ring's.
macro_rules! crate_candidate {
    ($($key:ident),*) => {$(
        impl Candidate for $key {
            fn seal(&mut self, nonce: &[u8; 12], buf: &mut [u8]) {
                self.seal_in_place(&Nonce::new(*nonce), &[], buf).unwrap();
            }

            fn open(&mut self, nonce: &[u8; 12], buf: &mut [u8]) -> bool {
                self.open_in_place(&Nonce::new(*nonce), &[], buf).is_ok()
            }
        }
    )*};
}

crate_candidate!(SessionKey, PacketKey);

mod rustcrypto_candidate {
    use aes_gcm::aead::{AeadInOut, KeyInit};
    use aes_gcm::{Aes128Gcm, Aes256Gcm};
    use chacha20poly1305::ChaCha20Poly1305;

    use super::{Algorithm, TAG_LEN};

    pub enum RustCrypto {
        Aes128(Box<Aes128Gcm>),
        Aes256(Box<Aes256Gcm>),
        ChaCha(Box<ChaCha20Poly1305>),
    }

    impl RustCrypto {
        pub fn new(algorithm: Algorithm, key: &[u8]) -> Self {
            match algorithm {
                Algorithm::Aes128Gcm => {
                    Self::Aes128(Box::new(Aes128Gcm::new_from_slice(key).unwrap()))
                }
                Algorithm::Aes256Gcm => {
                    Self::Aes256(Box::new(Aes256Gcm::new_from_slice(key).unwrap()))
                }
                Algorithm::ChaCha20Poly1305 => {
                    Self::ChaCha(Box::new(ChaCha20Poly1305::new_from_slice(key).unwrap()))
                }
            }
        }
    }

    fn seal<A: AeadInOut>(aead: &A, nonce: &[u8; 12], buf: &mut [u8]) {
        let (data, tag) = buf.split_at_mut(buf.len() - TAG_LEN);
        let nonce = aes_gcm::aead::Nonce::<A>::try_from(&nonce[..]).unwrap();
        let sealed = aead
            .encrypt_inout_detached(&nonce, &[], data.into())
            .unwrap();
        tag.copy_from_slice(&sealed);
    }

    fn open<A: AeadInOut>(aead: &A, nonce: &[u8; 12], buf: &mut [u8]) -> bool {
        let (data, tag) = buf.split_at_mut(buf.len() - TAG_LEN);
        let nonce = aes_gcm::aead::Nonce::<A>::try_from(&nonce[..]).unwrap();
        let tag = aes_gcm::aead::Tag::<A>::try_from(&tag[..]).unwrap();
        aead.decrypt_inout_detached(&nonce, &[], data.into(), &tag)
            .is_ok()
    }

    impl super::Candidate for RustCrypto {
        fn seal(&mut self, nonce: &[u8; 12], buf: &mut [u8]) {
            match self {
                Self::Aes128(a) => seal(&**a, nonce, buf),
                Self::Aes256(a) => seal(&**a, nonce, buf),
                Self::ChaCha(a) => seal(&**a, nonce, buf),
            }
        }

        fn open(&mut self, nonce: &[u8; 12], buf: &mut [u8]) -> bool {
            match self {
                Self::Aes128(a) => open(&**a, nonce, buf),
                Self::Aes256(a) => open(&**a, nonce, buf),
                Self::ChaCha(a) => open(&**a, nonce, buf),
            }
        }
    }
}

/// The best rate of ROUNDS rounds of `op`, in operations a second.
fn rate(mut op: impl FnMut()) -> f64 {
    op();
    let mut best: f64 = 0.0;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < ROUND {
            for _ in 0..16 {
                op();
            }
            n += 16;
        }
        best = best.max(n as f64 / start.elapsed().as_secs_f64());
    }
    best
}

fn mb_s(ops: f64, bytes: usize) -> f64 {
    ops * bytes as f64 / 1e6
}

const ALGORITHMS: [(Algorithm, &str); 3] = [
    (Algorithm::Aes128Gcm, "aes-128-gcm"),
    (Algorithm::Aes256Gcm, "aes-256-gcm"),
    (Algorithm::ChaCha20Poly1305, "chacha20-poly1305"),
];

fn candidate(library: &str, algorithm: Algorithm, key: &[u8]) -> Box<dyn Candidate> {
    match library {
        "openssl" => Box::new(openssl_candidate::Openssl::new(algorithm, key)),
        "ring" => Box::new(PacketKey::new(algorithm, key).unwrap()),
        "aws-lc-rs" => Box::new(SessionKey::new(algorithm, key).unwrap()),
        _ => Box::new(rustcrypto_candidate::RustCrypto::new(algorithm, key)),
    }
}

/// Nanoseconds to build (and drop) one key schedule, unboxed.
fn schedule_ns(library: &str, algorithm: Algorithm, key: &[u8]) -> f64 {
    let ops = match library {
        "openssl" => rate(|| drop(black_box(openssl_candidate::Openssl::new(algorithm, key)))),
        "ring" => rate(|| drop(black_box(PacketKey::new(algorithm, key)))),
        "aws-lc-rs" => rate(|| drop(black_box(SessionKey::new(algorithm, key)))),
        _ => rate(|| {
            drop(black_box(rustcrypto_candidate::RustCrypto::new(
                algorithm, key,
            )))
        }),
    };
    1e9 / ops
}

fn libraries() {
    let key = [0x42u8; 32];
    let nonce = [7u8; 12];
    println!(
        "AEAD, key schedule built once, MB/s (length record: ns per sealed 2-byte record; \
         key: ns to build a key schedule)"
    );
    println!(
        "{:<12} {:<18} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "library",
        "method",
        "seal 16K",
        "open 16K",
        "seal 1.4K",
        "open 1.4K",
        "len rec ns",
        "key ns"
    );
    for library in ["openssl", "ring", "aws-lc-rs", "rustcrypto"] {
        for (algorithm, name) in ALGORITHMS {
            let key = &key[..algorithm.key_len()];
            let mut aead = candidate(library, algorithm, key);
            let mut cells = Vec::new();
            for (size, _) in SIZES {
                let mut buf = vec![0x5au8; size + TAG_LEN];
                cells.push(mb_s(rate(|| aead.seal(&nonce, black_box(&mut buf))), size));
                let mut sealed = vec![0x5au8; size + TAG_LEN];
                aead.seal(&nonce, &mut sealed);
                cells.push(mb_s(
                    rate(|| {
                        buf.copy_from_slice(&sealed);
                        assert!(aead.open(&nonce, black_box(&mut buf)));
                    }),
                    size,
                ));
            }
            let mut record = [0u8; 2 + TAG_LEN];
            let record_ns = 1e9 / rate(|| aead.seal(&nonce, black_box(&mut record)));
            let key_ns = schedule_ns(library, algorithm, key);
            println!(
                "{library:<12} {name:<18} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>8.0}",
                cells[0], cells[1], cells[2], cells[3], record_ns, key_ns
            );
        }
    }
}

/// Whole chunks, length record included, through the crate's framing:
/// MB/s of payload.
fn framing() {
    println!();
    println!("ChunkSealer::seal_in_place and ChunkOpener::open, MB/s of payload");
    println!(
        "{:<18} {:>12} {:>12} {:>12} {:>12}",
        "method", "seal 16383", "open 16383", "seal 1400", "open 1400"
    );
    for (algorithm, name) in ALGORITHMS {
        let key = [0x42u8; 32];
        let key = &key[..algorithm.key_len()];
        let mut cells = Vec::new();
        for payload in [MAX_PAYLOAD, 1400] {
            let mut sealer = ChunkSealer::new(SessionKey::new(algorithm, key).unwrap());
            let mut buf = vec![0x5au8; RESERVE + payload + TAG_LEN];
            cells.push(mb_s(
                rate(|| {
                    let n = sealer.seal_in_place(black_box(&mut buf), payload).unwrap();
                    black_box(n);
                }),
                payload,
            ));
            // Open a long run of consecutive chunks, as a stream brings them.
            let count = 64;
            let chunk = RESERVE + payload + TAG_LEN;
            let mut sealer = ChunkSealer::new(SessionKey::new(algorithm, key).unwrap());
            let mut stream = vec![0x5au8; chunk * count];
            for piece in stream.chunks_mut(chunk) {
                sealer.seal_in_place(piece, payload).unwrap();
            }
            let mut work = stream.clone();
            let mut opener = ChunkOpener::new(SessionKey::new(algorithm, key).unwrap());
            let mut at = count;
            cells.push(mb_s(
                rate(|| {
                    if at == count {
                        work.copy_from_slice(&stream);
                        opener = ChunkOpener::new(SessionKey::new(algorithm, key).unwrap());
                        at = 0;
                    }
                    match opener.open(black_box(&mut work[at * chunk..])) {
                        Ok(Opened::Chunk { consumed, .. }) => assert_eq!(consumed, chunk),
                        other => panic!("{other:?}"),
                    }
                    at += 1;
                }),
                payload,
            ));
        }
        println!(
            "{name:<18} {:>12.0} {:>12.0} {:>12.0} {:>12.0}",
            cells[0], cells[1], cells[2], cells[3]
        );
    }
}

fn main() {
    libraries();
    framing();
}
