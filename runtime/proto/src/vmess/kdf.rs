//! The VMess AEAD key derivation: `KDF(key, path...)` is HMAC-SHA256 nested
//! once per path element, the innermost keyed with "VMess AEAD KDF", applied
//! to `key`. Each level's hash function is the HMAC of the level below, so
//! a level's block is SHA-256's 64 bytes and its output 32.
//!
//! Also the command key every VMess secret starts from: the MD5 of the
//! user's UUID followed by a fixed GUID.

use md5::{Digest, Md5};
use ring::digest::{Context, SHA256};

/// The key of the innermost HMAC.
const ROOT: &[u8] = b"VMess AEAD KDF";
/// The path of the auth id's AES key.
pub const AUTH_ID_KEY: &[u8] = b"AES Auth ID Encryption";
/// The paths of the request header's length record and payload.
pub const HEADER_LEN_KEY: &[u8] = b"VMess Header AEAD Key_Length";
pub const HEADER_LEN_NONCE: &[u8] = b"VMess Header AEAD Nonce_Length";
pub const HEADER_KEY: &[u8] = b"VMess Header AEAD Key";
pub const HEADER_NONCE: &[u8] = b"VMess Header AEAD Nonce";
/// The paths of the response header's length record and payload.
pub const RESPONSE_LEN_KEY: &[u8] = b"AEAD Resp Header Len Key";
pub const RESPONSE_LEN_NONCE: &[u8] = b"AEAD Resp Header Len IV";
pub const RESPONSE_KEY: &[u8] = b"AEAD Resp Header Key";
pub const RESPONSE_NONCE: &[u8] = b"AEAD Resp Header IV";

/// What the command key appends to the UUID.
const CMD_KEY_SUFFIX: &[u8] = b"c48619fe-8f02-49e0-b9e9-edf763e17e21";

/// SHA-256's block: every level of the nesting keys on it.
const BLOCK: usize = 64;
/// The longest path VMess uses (a header key: its name, the auth id and the
/// connection nonce).
const MAX_PATH: usize = 3;

/// A user's command key: MD5(uuid || CMD_KEY_SUFFIX).
pub fn cmd_key(uuid: &[u8; 16]) -> [u8; 16] {
    let mut md5 = Md5::new();
    md5.update(uuid);
    md5.update(CMD_KEY_SUFFIX);
    md5.finalize().into()
}

/// KDF(key, path...), 32 bytes.
pub fn kdf<const N: usize>(key: &[u8], path: [&[u8]; N]) -> [u8; 32] {
    const { assert!(N <= MAX_PATH, "no VMess key has a longer path") };
    let mut keys: [&[u8]; MAX_PATH + 1] = [&[]; MAX_PATH + 1];
    keys[0] = ROOT;
    for (slot, element) in keys[1..].iter_mut().zip(path) {
        *slot = element;
    }
    nested(&keys[..=N], &[key])
}

/// KDF(key, path...) cut to 16 bytes, an AES-128 key.
pub fn kdf16<const N: usize>(key: &[u8], path: [&[u8]; N]) -> [u8; 16] {
    let mut out = [0; 16];
    out.copy_from_slice(&kdf(key, path)[..16]);
    out
}

/// KDF(key, path...) cut to 12 bytes, an AEAD nonce.
pub fn kdf12<const N: usize>(key: &[u8], path: [&[u8]; N]) -> [u8; 12] {
    let mut out = [0; 12];
    out.copy_from_slice(&kdf(key, path)[..12]);
    out
}

/// The hash of the concatenated `parts` under the HMAC keyed by the last
/// of `keys`, whose hash function is the HMAC of the keys before it (plain
/// SHA-256 under no key). `parts` holds at most `MAX_PATH + 3 - keys.len()`
/// slices, so the one more each level adds always fits.
fn nested(keys: &[&[u8]], parts: &[&[u8]]) -> [u8; 32] {
    let Some((key, below)) = keys.split_last() else {
        let mut sha = Context::new(&SHA256);
        for part in parts {
            sha.update(part);
        }
        let mut out = [0; 32];
        out.copy_from_slice(sha.finish().as_ref());
        return out;
    };
    // A key longer than the block is replaced by its hash, as HMAC does.
    let hashed;
    let key = if key.len() > BLOCK {
        hashed = nested(below, &[key]);
        &hashed[..]
    } else {
        key
    };
    let mut inner_pad = [0x36; BLOCK];
    let mut outer_pad = [0x5c; BLOCK];
    for ((i, o), k) in inner_pad.iter_mut().zip(&mut outer_pad).zip(key) {
        *i ^= k;
        *o ^= k;
    }
    let mut inner_parts: [&[u8]; MAX_PATH + 3] = [&[]; MAX_PATH + 3];
    inner_parts[0] = &inner_pad;
    let n = parts.len().min(MAX_PATH + 2);
    inner_parts[1..=n].copy_from_slice(&parts[..n]);
    let inner = nested(below, &inner_parts[..=n]);
    nested(below, &[&outer_pad, &inner])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmess::test_support::hex;

    // The vectors of v2ray's own KDF tests (proxy/vmess/aead), which other
    // implementations repeat.
    #[test]
    fn kdf_matches_v2rays_vectors() {
        assert_eq!(
            kdf(b"Demo Key for Auth ID Test", []).to_vec(),
            hex("7b9d2c2e1fab0b407a2ec00bab371b9667ca35f6674086ef384251821f6005f8")
        );
        assert_eq!(
            kdf16(
                b"Demo Key for Auth ID Test",
                [b"Demo Path for Auth ID Test"]
            )
            .to_vec(),
            hex("66e41ad47fa745fbfd1e97325e93dbf4")
        );
        assert_eq!(
            kdf(
                b"Demo Key for KDF Value Test",
                [
                    b"Demo Path for KDF Value Test",
                    b"Demo Path for KDF Value Test2",
                    b"Demo Path for KDF Value Test3",
                ]
            )
            .to_vec(),
            hex("53e9d7e1bd7bd25022b71ead07d8a596efc8a845c7888652fd684b4903dc8892")
        );
    }

    #[test]
    fn a_path_element_longer_than_a_block_is_hashed_first() {
        let long = [7u8; 100];
        let hashed = nested(&[ROOT], &[&long]);
        assert_eq!(kdf(b"k", [&long[..]]), kdf(b"k", [&hashed[..]]));
    }

    #[test]
    fn the_cmd_key_is_the_md5_of_the_uuid_and_the_guid() {
        let uuid =
            etemenanki_ir::spec::Uuid::parse("450bae28-b9da-67d0-16bc-4918dc8d79b5").unwrap();
        assert_eq!(
            cmd_key(&uuid.0).to_vec(),
            hex("da8b7df4396329ebe7a74afc62a9e7c8")
        );
    }
}
