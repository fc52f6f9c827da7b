//! Fresh random bytes for salts, session ids, nonces and padding lengths:
//! the system's CSPRNG through ring, with no state and no allocation.

use ring::rand::{SecureRandom, SystemRandom};

use super::{Ss2022Error, MAX_PADDING};

pub fn fill(buf: &mut [u8]) -> Result<(), Ss2022Error> {
    SystemRandom::new()
        .fill(buf)
        .map_err(|_| Ss2022Error::Random)
}

/// Fills `salt` and draws a padding length in 1..=MAX_PADDING (a request
/// header with no initial payload must carry some, SIP022 3.1.4), both
/// from one call to the system's CSPRNG: a dial asks the kernel once.
pub fn salt_and_padding(salt: &mut [u8]) -> Result<usize, Ss2022Error> {
    let mut bytes = [0; super::MAX_KEY_LEN + 2];
    let drawn = bytes
        .get_mut(..salt.len() + 2)
        .ok_or(Ss2022Error::KeyLength)?;
    fill(drawn)?;
    let (salt_bytes, padding) = drawn.split_at(salt.len());
    salt.copy_from_slice(salt_bytes);
    Ok(1 + usize::from(u16::from_le_bytes([padding[0], padding[1]])) % MAX_PADDING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_draw_gives_a_fresh_salt_and_a_padding_within_bounds() {
        let mut seen = std::collections::HashSet::new();
        for len in [16, 32] {
            for _ in 0..200 {
                let mut salt = [0; 32];
                let padding = salt_and_padding(&mut salt[..len]).unwrap();
                assert!((1..=MAX_PADDING).contains(&padding));
                assert!(
                    salt[len..].iter().all(|&b| b == 0),
                    "only the salt is filled"
                );
                assert!(seen.insert(salt), "salts repeat");
            }
        }
        assert_eq!(
            salt_and_padding(&mut [0; 33]).err(),
            Some(Ss2022Error::KeyLength)
        );
    }
}
