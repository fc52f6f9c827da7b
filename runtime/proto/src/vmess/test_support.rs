//! For tests: hex, and the server's side of a request built from the same
//! primitives (open the header, answer with a response header and chunks).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::auth_id::AuthIdKey;
use super::body::{BodyKey, BodySealer, HEADROOM, TAILROOM};
use super::header::fnv1a32;
use super::header::{Entropy, Request};
use super::kdf::{kdf12, kdf16, HEADER_KEY, HEADER_LEN_KEY, HEADER_LEN_NONCE, HEADER_NONCE};
use super::response::seal_header;
use super::security::Security;
use crate::aead::{Algorithm, Nonce, SessionKey, TAG_LEN};
use crate::codec::{ClientCodec, ClientStep};
use crate::Address;

pub fn hex(text: &str) -> Vec<u8> {
    let text: String = text.split_whitespace().collect();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

pub fn uuid() -> [u8; 16] {
    etemenanki_ir::spec::Uuid::parse("b831381d-6324-4d53-ad4f-8cda48b30811")
        .unwrap()
        .0
}

pub fn entropy(seed: u8) -> Entropy {
    let bytes: Vec<u8> = (0..Entropy::LEN as u8)
        .map(|i| i.wrapping_mul(29) ^ seed)
        .collect();
    Entropy::from_bytes(&bytes.try_into().unwrap())
}

pub fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// The bytes a request's codec writes at dial.
pub fn dial_bytes(mut request: Request) -> Vec<u8> {
    let mut out = Vec::new();
    assert_eq!(request.start(&mut out).unwrap(), ClientStep::Open(()));
    out
}

/// A request header as the server reads it.
pub struct Opened {
    pub time: u64,
    pub body: BodyKey,
    pub response_auth: u8,
    pub options: u8,
    pub padding: usize,
    pub security: u8,
    pub command: u8,
    pub target: Address,
    /// The bytes of the wire the sealed header took.
    pub consumed: usize,
}

fn open_record(
    cmd: &[u8; 16],
    names: [&[u8]; 2],
    id: &[u8],
    nonce: &[u8],
    record: &mut [u8],
) -> usize {
    let key = SessionKey::new(Algorithm::Aes128Gcm, &kdf16(cmd, [names[0], id, nonce])).unwrap();
    let n = Nonce::new(kdf12(cmd, [names[1], id, nonce]));
    key.open_in_place(&n, id, record).unwrap()
}

/// Opens the sealed request header at the start of `wire` with `cmd`, the
/// user's command key, as v2ray's server does.
pub fn open_request(cmd: &[u8; 16], wire: &[u8]) -> Opened {
    let mut wire = wire.to_vec();
    let id: [u8; 16] = wire[..16].try_into().unwrap();
    let time = AuthIdKey::new(cmd)
        .open(&id)
        .expect("the auth id's CRC holds");
    let nonce = wire[34..42].to_vec();
    open_record(
        cmd,
        [HEADER_LEN_KEY, HEADER_LEN_NONCE],
        &id,
        &nonce,
        &mut wire[16..34],
    );
    let len = usize::from(u16::from_be_bytes([wire[16], wire[17]]));
    let end = 42 + len + TAG_LEN;
    open_record(
        cmd,
        [HEADER_KEY, HEADER_NONCE],
        &id,
        &nonce,
        &mut wire[42..end],
    );
    let h = &wire[42..42 + len];
    assert_eq!(h[0], 1, "version");
    let checksum = u32::from_be_bytes(h[len - 4..].try_into().unwrap());
    assert_eq!(checksum, fnv1a32(&h[..len - 4]), "the header's FNV-1a");
    let port = u16::from_be_bytes([h[38], h[39]]);
    let (target, at) = match h[40] {
        1 => {
            let ip: [u8; 4] = h[41..45].try_into().unwrap();
            (Address::Ip(SocketAddr::from((ip, port))), 45)
        }
        2 => {
            let n = usize::from(h[41]);
            let name = std::str::from_utf8(&h[42..42 + n]).unwrap();
            (Address::Domain(name.into(), port), 42 + n)
        }
        3 => {
            let ip: [u8; 16] = h[41..57].try_into().unwrap();
            (Address::Ip(SocketAddr::from((ip, port))), 57)
        }
        other => panic!("address type {other}"),
    };
    let padding = usize::from(h[35] >> 4);
    assert_eq!(
        at + padding + 4,
        len,
        "the header ends after padding and checksum"
    );
    Opened {
        time,
        body: BodyKey {
            iv: h[1..17].try_into().unwrap(),
            key: h[17..33].try_into().unwrap(),
        },
        response_auth: h[33],
        options: h[34],
        padding,
        security: h[35] & 0x0f,
        command: h[37],
        target,
        consumed: end,
    }
}

/// The server's answer: a response header echoing `auth`, then `payloads`
/// as chunks under `response`, the keys the server derives.
pub fn respond(
    response: &BodyKey,
    auth: u8,
    security: Security,
    packets: bool,
    payloads: &[&[u8]],
) -> Vec<u8> {
    let mut wire = seal_header(response, auth).unwrap().to_vec();
    let mut sealer = BodySealer::new(security, packets, response, &[3; 32]).unwrap();
    for payload in payloads {
        let mut buf = vec![0u8; HEADROOM + payload.len() + TAILROOM];
        buf[HEADROOM..HEADROOM + payload.len()].copy_from_slice(payload);
        let range = sealer.seal(&mut buf, payload.len()).unwrap();
        wire.extend_from_slice(&buf[range]);
    }
    wire
}
