//! Identity headers (SIP023): for each identity PSK, one AES block that
//! names the next PSK by the first 16 bytes of its BLAKE3 hash, so a relay
//! or a multi-user server finds the key of the layer after it.
//!
//! - TCP: between the salt and the first header chunk, each sealed with the
//!   identity subkey of its PSK and the request's salt.
//! - UDP: after the separate header, each sealed with its PSK itself, over
//!   the hash XORed with the separate header's plaintext.

use super::block::Block;
use super::kdf::{identity_block, Key};
use super::{Ss2022Error, BLOCK_LEN};

pub struct Identity {
    psk: Key,
    /// The block of this PSK, for UDP.
    block: Block,
    /// blake3(next PSK)[..16].
    next_hash: [u8; BLOCK_LEN],
}

impl Identity {
    pub fn new(psk: Key, next: &Key) -> Result<Identity, Ss2022Error> {
        Ok(Identity {
            block: Block::new(psk.as_bytes())?,
            psk,
            next_hash: hash16(next),
        })
    }
}

/// blake3(key)[..16], the name an identity header gives a key.
pub fn hash16(key: &Key) -> [u8; BLOCK_LEN] {
    let mut hash = [0; BLOCK_LEN];
    hash.copy_from_slice(&blake3::hash(key.as_bytes()).as_bytes()[..BLOCK_LEN]);
    hash
}

/// Appends the identity headers of a TCP request whose salt is `salt`.
pub fn append_tcp(
    identities: &[Identity],
    salt: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Ss2022Error> {
    for identity in identities {
        let mut header = identity.next_hash;
        identity_block(&identity.psk, salt)?.encrypt(&mut header);
        out.extend_from_slice(&header);
    }
    Ok(())
}

/// Writes the identity headers of a UDP packet whose separate header, in
/// the clear, is `separate`, one block each at the start of `out`.
pub fn write_udp(identities: &[Identity], separate: &[u8; BLOCK_LEN], out: &mut [u8]) {
    for (identity, slot) in identities.iter().zip(out.chunks_exact_mut(BLOCK_LEN)) {
        let mut header = identity.next_hash;
        for (byte, mask) in header.iter_mut().zip(separate) {
            *byte ^= mask;
        }
        identity.block.encrypt(&mut header);
        slot.copy_from_slice(&header);
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// What a server holding `ipsk` finds in a TCP identity header: the
    /// hash of the key after it.
    pub fn peel_tcp(ipsk: &[u8], salt: &[u8], header: &[u8]) -> [u8; BLOCK_LEN] {
        let key = Key::for_test(ipsk);
        let mut block: [u8; BLOCK_LEN] = header.try_into().unwrap();
        identity_block(&key, salt).unwrap().decrypt(&mut block);
        block
    }

    /// What a server holding `ipsk` finds in a UDP identity header.
    pub fn peel_udp(ipsk: &[u8], separate: &[u8; BLOCK_LEN], header: &[u8]) -> [u8; BLOCK_LEN] {
        let mut block: [u8; BLOCK_LEN] = header.try_into().unwrap();
        Block::new(ipsk).unwrap().decrypt(&mut block);
        for (byte, mask) in block.iter_mut().zip(separate) {
            *byte ^= mask;
        }
        block
    }

    pub fn hash16(key: &[u8]) -> [u8; BLOCK_LEN] {
        blake3::hash(key).as_bytes()[..BLOCK_LEN]
            .try_into()
            .unwrap()
    }

    #[test]
    fn each_tcp_identity_header_names_the_next_key_under_its_own() {
        let (i1, i2, user) = (
            Key::for_test(&[1; 32]),
            Key::for_test(&[2; 32]),
            Key::for_test(&[3; 32]),
        );
        let chain = [
            Identity::new(i1, &i2).unwrap(),
            Identity::new(i2, &user).unwrap(),
        ];
        let salt = [0x5a; 32];
        let mut out = Vec::new();
        append_tcp(&chain, &salt, &mut out).unwrap();
        assert_eq!(out.len(), 32);
        assert_eq!(peel_tcp(&[1; 32], &salt, &out[..16]), hash16(&[2; 32]));
        assert_eq!(peel_tcp(&[2; 32], &salt, &out[16..]), hash16(&[3; 32]));
        // Another salt, another subkey: the header changes with every request.
        let mut again = Vec::new();
        append_tcp(&chain, &[0x5b; 32], &mut again).unwrap();
        assert_ne!(again, out);
    }

    #[test]
    fn each_udp_identity_header_is_masked_by_the_separate_header() {
        let (i1, user) = (Key::for_test(&[1; 16]), Key::for_test(&[3; 16]));
        let chain = [Identity::new(i1, &user).unwrap()];
        let separate = [0x11; 16];
        let mut out = [0; 16];
        write_udp(&chain, &separate, &mut out);
        assert_eq!(peel_udp(&[1; 16], &separate, &out), hash16(&[3; 16]));
    }
}
