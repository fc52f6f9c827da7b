//! plan.bin: a fixed header followed by the spec encoded with postcard.
//!
//! ```text
//! magic            8 bytes  "ETEMPLAN"
//! format version   u16 LE
//! compiler version u8 length + UTF-8
//! source digest    32 bytes (SHA-256 of the source text)
//! spec digest      32 bytes (SHA-256 of the encoded spec)
//! spec             postcard
//! ```
//!
//! Decoding never panics: a short, foreign, corrupt or other-version file is
//! a [`DecodeError`] that says what was found and what was expected.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::spec::Spec;

pub const MAGIC: &[u8; 8] = b"ETEMPLAN";
/// Bumped with every change to the encoding of the spec (2: socks and http
/// inbounds carry an optional TLS server configuration; 3: the route table
/// carries its domain strategy; 4: a ws transport carries its early data;
/// 5: trojan and vless inbounds carry their fallback; 6: a DNS server
/// carries its kind, plain, tls or https, and the dns inbound exists; 7: a
/// ws inbound carries the Host it checks, and a hysteria2 inbound a
/// password list, its masquerade and its bandwidth limits).
pub const FORMAT_VERSION: u16 = 7;

/// A decoded plan: its header and its spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub compiler_version: String,
    pub source_digest: [u8; 32],
    pub spec_digest: [u8; 32],
    pub spec: Spec,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Truncated { needed: usize, found: usize },
    NotAPlan { found: Vec<u8> },
    FormatVersion { found: u16 },
    CorruptHeader(&'static str),
    DigestMismatch,
    Spec(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated { needed, found } => write!(
                f,
                "truncated plan: the header needs at least {needed} bytes, found {found}"
            ),
            DecodeError::NotAPlan { found } => write!(
                f,
                "not a plan file: expected the magic bytes {:?}, found {:?}",
                String::from_utf8_lossy(MAGIC),
                String::from_utf8_lossy(found)
            ),
            DecodeError::FormatVersion { found } => write!(
                f,
                "plan format version {found} is not supported: this build reads version {FORMAT_VERSION}; rebuild the plan with a matching etc"
            ),
            DecodeError::CorruptHeader(what) => write!(f, "corrupt plan header: {what}"),
            DecodeError::DigestMismatch => f.write_str(
                "corrupt plan: the spec does not match the digest in its header (the file is damaged or truncated)",
            ),
            DecodeError::Spec(err) => write!(f, "corrupt plan: the spec does not decode: {err}"),
        }
    }
}

impl std::error::Error for DecodeError {}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Encodes a spec compiled from `source` into plan.bin bytes.
pub fn encode(spec: &Spec, source: &[u8], compiler_version: &str) -> Vec<u8> {
    let body = postcard::to_allocvec(spec).expect("a spec always serializes");
    let version = compiler_version.as_bytes();
    let version = &version[..version.len().min(255)];
    let mut out = Vec::with_capacity(8 + 2 + 1 + version.len() + 64 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(version.len() as u8);
    out.extend_from_slice(version);
    out.extend_from_slice(&sha256(source));
    out.extend_from_slice(&sha256(&body));
    out.extend_from_slice(&body);
    out
}

/// Decodes plan.bin bytes.
pub fn decode(bytes: &[u8]) -> Result<Plan, DecodeError> {
    const FIXED: usize = 8 + 2 + 1;
    if bytes.len() < 8 {
        if !MAGIC.starts_with(bytes) {
            return Err(DecodeError::NotAPlan {
                found: bytes.to_vec(),
            });
        }
        return Err(DecodeError::Truncated {
            needed: FIXED + 64,
            found: bytes.len(),
        });
    }
    if &bytes[..8] != MAGIC {
        return Err(DecodeError::NotAPlan {
            found: bytes[..8].to_vec(),
        });
    }
    if bytes.len() < FIXED {
        return Err(DecodeError::Truncated {
            needed: FIXED + 64,
            found: bytes.len(),
        });
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    if version != FORMAT_VERSION {
        return Err(DecodeError::FormatVersion { found: version });
    }
    let vlen = usize::from(bytes[10]);
    let needed = FIXED + vlen + 64;
    if bytes.len() < needed {
        return Err(DecodeError::Truncated {
            needed,
            found: bytes.len(),
        });
    }
    let compiler_version = std::str::from_utf8(&bytes[FIXED..FIXED + vlen])
        .map_err(|_| DecodeError::CorruptHeader("the compiler version is not UTF-8"))?
        .to_owned();
    let mut at = FIXED + vlen;
    let source_digest: [u8; 32] = bytes[at..at + 32].try_into().expect("32 bytes");
    at += 32;
    let spec_digest: [u8; 32] = bytes[at..at + 32].try_into().expect("32 bytes");
    at += 32;
    let body = &bytes[at..];
    if sha256(body) != spec_digest {
        return Err(DecodeError::DigestMismatch);
    }
    let spec = postcard::from_bytes(body).map_err(|e| DecodeError::Spec(e.to_string()))?;
    Ok(Plan {
        compiler_version,
        source_digest,
        spec_digest,
        spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::RouteTable;
    use crate::spec::*;

    fn spec() -> Spec {
        Spec {
            inbounds: vec![],
            outbounds: vec![OutboundSpec {
                tag: "direct".into(),
                protocol: OutboundProtocol::Freedom {
                    address_family: AddressFamily::Auto,
                },
                drain: DrainPolicy::Keep,
            }],
            balancers: vec![],
            route: RouteTable::new(vec![], "direct".into()).unwrap(),
            dns: DnsSpec::System,
            socket: SocketPolicy::default(),
            limits: Limits::default(),
        }
    }

    #[test]
    fn a_plan_round_trips() {
        let bytes = encode(&spec(), b"source", "0.1.0");
        let plan = decode(&bytes).unwrap();
        assert_eq!(plan.spec, spec());
        assert_eq!(plan.compiler_version, "0.1.0");
        assert_eq!(plan.source_digest, sha256(b"source"));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let bytes = encode(&spec(), b"source", "0.1.0");
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "length {len} decoded");
        }
    }

    #[test]
    fn another_format_version_says_what_it_found_and_needs() {
        let mut bytes = encode(&spec(), b"source", "0.1.0");
        bytes[8] = 9;
        let err = decode(&bytes).unwrap_err().to_string();
        assert_eq!(
            err,
            format!("plan format version 9 is not supported: this build reads version {FORMAT_VERSION}; rebuild the plan with a matching etc")
        );
    }

    #[test]
    fn a_flipped_byte_in_the_spec_is_caught_by_the_digest() {
        let mut bytes = encode(&spec(), b"source", "0.1.0");
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        assert_eq!(decode(&bytes), Err(DecodeError::DigestMismatch));
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small deterministic xorshift generator: bounded and reproducible.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let good = encode(&spec(), b"source", "0.1.0");
        for _ in 0..2_000 {
            let len = (next() % 200) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if next() % 2 == 0 {
                // Keep a valid header so the body decoder is exercised too.
                let keep = good.len().min(11 + 5 + 64);
                bytes.splice(0..0, good[..keep].iter().copied());
                let body = bytes[keep..].to_vec();
                let digest = sha256(&body);
                bytes[keep - 32..keep].copy_from_slice(&digest);
            }
            let _ = decode(&bytes);
        }
    }
}
