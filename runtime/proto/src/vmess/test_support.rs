//! For tests: hex, and the server's side of a request built from the same
//! primitives (open the header, answer with a response header and chunks).

use std::net::SocketAddr;

use super::auth_id::opener;
use super::body::{BodyKey, BodySealer, HEADROOM, TAILROOM};
use super::header::fnv1a32;
use super::kdf::{
    kdf12, kdf16, HEADER_KEY, HEADER_LEN_KEY, HEADER_LEN_NONCE, HEADER_NONCE, RESPONSE_KEY,
    RESPONSE_LEN_KEY, RESPONSE_LEN_NONCE, RESPONSE_NONCE,
};
use super::security::Security;
use crate::aead::{Algorithm, Nonce, SessionKey, TAG_LEN};
use crate::Address;

pub fn hex(text: &str) -> Vec<u8> {
    let text: String = text.split_whitespace().collect();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
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
    let (time, _) = opener::open(cmd, &id).expect("the auth id's CRC holds");
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
    let key = |path| SessionKey::new(Algorithm::Aes128Gcm, &kdf16(&response.key, [path])).unwrap();
    let mut length = [0u8, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    key(RESPONSE_LEN_KEY)
        .seal_in_place(
            &Nonce::new(kdf12(&response.iv, [RESPONSE_LEN_NONCE])),
            &[],
            &mut length,
        )
        .unwrap();
    let mut header = [0u8; 4 + TAG_LEN];
    header[0] = auth;
    key(RESPONSE_KEY)
        .seal_in_place(
            &Nonce::new(kdf12(&response.iv, [RESPONSE_NONCE])),
            &[],
            &mut header,
        )
        .unwrap();
    let mut wire = length.to_vec();
    wire.extend_from_slice(&header);
    let mut sealer = BodySealer::new(security, packets, response, &[3; 32]).unwrap();
    for payload in payloads {
        let mut buf = vec![0u8; HEADROOM + payload.len() + TAILROOM];
        buf[HEADROOM..HEADROOM + payload.len()].copy_from_slice(payload);
        let range = sealer.seal(&mut buf, payload.len()).unwrap();
        wire.extend_from_slice(&buf[range]);
    }
    wire
}
