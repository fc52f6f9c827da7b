//! Fresh random bytes for salts, session ids, nonces and padding lengths:
//! the system's CSPRNG through ring, with no state and no allocation.

use ring::rand::{SecureRandom, SystemRandom};

use super::{Ss2022Error, MAX_PADDING};

pub fn fill(buf: &mut [u8]) -> Result<(), Ss2022Error> {
    SystemRandom::new()
        .fill(buf)
        .map_err(|_| Ss2022Error::Random)
}

/// A padding length in 1..=MAX_PADDING: a request header with no initial
/// payload must carry some (SIP022 3.1.4).
pub fn padding_len() -> Result<usize, Ss2022Error> {
    let mut bytes = [0; 2];
    fill(&mut bytes)?;
    Ok(1 + usize::from(u16::from_le_bytes(bytes)) % MAX_PADDING)
}
