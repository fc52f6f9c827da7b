//! The keys of a Shadowsocks 2022 inbound, checked and expanded once when
//! it is built: the server PSK and, for a multi-user server (SIP023), each
//! user's PSK, found by the first 16 bytes of its BLAKE3 hash that the
//! client's identity header carries.

use std::collections::HashMap;
use std::time::SystemTime;

use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use etemenanki_ir::spec::Ss2022Method;

use super::block::Block;
use super::identity::hash16;
use super::kdf::{algorithm_of, Key};
use super::{Ss2022Error, BLOCK_LEN};
use crate::aead::Algorithm;

struct User {
    psk: Key,
    /// AES block of the user's PSK: it seals our UDP replies' separate
    /// headers.
    block: Block,
}

/// Everything an inbound's connections and UDP sessions are keyed from.
pub struct Users {
    algorithm: Algorithm,
    psk: Key,
    /// AES methods: the block of the server PSK, which opens the separate
    /// UDP header and the UDP identity header.
    block: Option<Block>,
    /// 2022-blake3-chacha20-poly1305: UDP packets are sealed with the PSK.
    xchacha: Option<XChaCha20Poly1305>,
    users: Vec<User>,
    /// blake3(user PSK)[..16] to the user's index.
    by_hash: HashMap<[u8; BLOCK_LEN], usize>,
    clock: fn() -> SystemTime,
}

/// Which key a flow is under: the server PSK of a single-user inbound, or
/// the user at this index of the PSKs [`Users::new`] was given.
pub type UserId = Option<usize>;

impl Users {
    /// A single-user inbound when `user_psks` is empty, else a multi-user
    /// one whose clients send identity headers (AES methods only). Every
    /// PSK must have the method's length. Two users with the same PSK
    /// cannot be told apart: the first is found.
    ///
    /// `clock` stamps a TCP response header when the first reply bytes
    /// leave, which may be long after the request: the runtime passes
    /// `SystemTime::now`, tests a fixed time.
    pub fn new(
        method: Ss2022Method,
        psk: &[u8],
        user_psks: &[&[u8]],
        clock: fn() -> SystemTime,
    ) -> Result<Users, Ss2022Error> {
        let len = method.key_len();
        let psk = Key::new(psk, len)?;
        let (algorithm, aes) = algorithm_of(method);
        if !aes && !user_psks.is_empty() {
            return Err(Ss2022Error::IdentityNeedsAes);
        }
        let mut users = Vec::with_capacity(user_psks.len());
        let mut by_hash = HashMap::with_capacity(user_psks.len());
        for (index, user_psk) in user_psks.iter().enumerate() {
            let psk = Key::new(user_psk, len)?;
            by_hash.entry(hash16(&psk)).or_insert(index);
            users.push(User {
                block: Block::new(psk.as_bytes())?,
                psk,
            });
        }
        let (block, xchacha) = if aes {
            (Some(Block::new(psk.as_bytes())?), None)
        } else {
            let xchacha = XChaCha20Poly1305::new_from_slice(psk.as_bytes())
                .map_err(|_| Ss2022Error::KeyLength)?;
            (None, Some(xchacha))
        };
        Ok(Users {
            algorithm,
            psk,
            block,
            xchacha,
            users,
            by_hash,
            clock,
        })
    }

    pub(super) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A salt is as long as the key.
    pub(super) fn salt_len(&self) -> usize {
        self.psk.as_bytes().len()
    }

    /// The server PSK: it opens identity headers, or is the only user's.
    pub(super) fn server_psk(&self) -> &Key {
        &self.psk
    }

    /// Whether clients send an identity header.
    pub(super) fn multi_user(&self) -> bool {
        !self.users.is_empty()
    }

    /// The identity of `user`, the hash its identity headers carry (None
    /// for the one user of a single-user inbound): what a new table is
    /// asked whether this user remains.
    pub fn identity(&self, user: UserId) -> Option<[u8; BLOCK_LEN]> {
        user.and_then(|index| self.users.get(index))
            .map(|user| hash16(&user.psk))
    }

    /// Whether a user has the identity `hash`.
    pub fn knows(&self, hash: &[u8; BLOCK_LEN]) -> bool {
        self.by_hash.contains_key(hash)
    }

    /// The user an identity header names, by the hash it carries.
    pub(super) fn find(&self, hash: &[u8; BLOCK_LEN]) -> Option<usize> {
        self.by_hash.get(hash).copied()
    }

    /// The PSK a flow of `user` is sealed under.
    pub(super) fn psk_of(&self, user: UserId) -> Option<&Key> {
        match user {
            None => Some(&self.psk),
            Some(index) => self.users.get(index).map(|user| &user.psk),
        }
    }

    /// AES methods: the block that seals `user`'s UDP reply headers.
    pub(super) fn reply_block(&self, user: UserId) -> Option<&Block> {
        match user {
            None => self.block.as_ref(),
            Some(index) => self.users.get(index).map(|user| &user.block),
        }
    }

    pub(super) fn block(&self) -> Option<&Block> {
        self.block.as_ref()
    }

    pub(super) fn xchacha(&self) -> Option<&XChaCha20Poly1305> {
        self.xchacha.as_ref()
    }

    pub(super) fn clock(&self) -> fn() -> SystemTime {
        self.clock
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn epoch() -> SystemTime {
        UNIX_EPOCH
    }

    #[test]
    fn every_psk_must_have_the_methods_length_and_users_need_aes() {
        let m = Ss2022Method::Blake3Aes128Gcm;
        assert!(Users::new(m, &[1; 16], &[&[2; 16], &[3; 16]], epoch).is_ok());
        assert_eq!(
            Users::new(m, &[1; 32], &[], epoch).err(),
            Some(Ss2022Error::KeyLength)
        );
        assert_eq!(
            Users::new(m, &[1; 16], &[&[2; 32]], epoch).err(),
            Some(Ss2022Error::KeyLength)
        );
        assert_eq!(
            Users::new(
                Ss2022Method::Blake3Chacha20Poly1305,
                &[1; 32],
                &[&[2; 32]],
                epoch
            )
            .err(),
            Some(Ss2022Error::IdentityNeedsAes)
        );
    }

    #[test]
    fn a_user_is_found_by_the_hash_of_its_psk() {
        let m = Ss2022Method::Blake3Aes256Gcm;
        let users = Users::new(m, &[1; 32], &[&[2; 32], &[3; 32], &[2; 32]], epoch).unwrap();
        assert!(users.multi_user());
        let hash = |byte| hash16(&Key::new(&[byte; 32], 32).unwrap());
        assert_eq!(users.find(&hash(3)), Some(1));
        assert_eq!(users.find(&hash(2)), Some(0), "the first of two alike");
        assert_eq!(
            users.find(&hash(1)),
            None,
            "the server's own psk is no user"
        );
        assert_eq!(users.psk_of(Some(1)).unwrap().as_bytes(), &[3; 32]);
        assert_eq!(users.psk_of(None).unwrap().as_bytes(), &[1; 32]);
        assert!(users.psk_of(Some(9)).is_none());
    }
}
