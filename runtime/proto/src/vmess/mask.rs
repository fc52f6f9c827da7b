//! Chunk masking and global padding: a SHAKE128 stream seeded with the
//! body IV, read two bytes at a time. With padding on, each chunk takes
//! one read for its padding length (mod 64) and then one for the mask its
//! length is XORed with; without, only the mask. Both ends read in the
//! same order, so the streams stay in step.
//!
//! The padding itself travels in clear, so its bytes come from a SHAKE128
//! stream of its own, seeded with fresh random bytes per connection: none
//! of the mask stream, or of any other secret, shows on the wire.

use sha3::digest::{ExtendableOutput, Update, XofReader};
use sha3::{Shake128, Shake128Reader};

/// Padding lengths are below this.
pub const MAX_PADDING: usize = 63;

/// One direction's length masks and padding lengths.
pub struct Mask(Shake128Reader);

impl Mask {
    pub fn new(iv: &[u8; 16]) -> Self {
        let mut shake = Shake128::default();
        shake.update(iv);
        Self(shake.finalize_xof())
    }

    fn next(&mut self) -> u16 {
        let mut two = [0; 2];
        self.0.read(&mut two);
        u16::from_be_bytes(two)
    }

    /// The mask of the next chunk's length.
    pub fn length_mask(&mut self) -> u16 {
        self.next()
    }

    /// The next chunk's padding length, read before its mask.
    pub fn padding_len(&mut self) -> usize {
        usize::from(self.next() % 64)
    }
}

/// The bytes padding is filled with.
pub struct Filler(Shake128Reader);

impl Filler {
    pub fn new(seed: &[u8; 32]) -> Self {
        let mut shake = Shake128::default();
        shake.update(seed);
        Self(shake.finalize_xof())
    }

    pub fn fill(&mut self, out: &mut [u8]) {
        self.0.read(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SHAKE128 of sixteen zero bytes begins 8f8e 4f61 2e61 ffb9 (Python's
    /// hashlib.shake_128): a padded chunk takes a padding length from the
    /// first word (0x8f8e % 64 = 14) and its mask from the second, the next
    /// chunk the third and fourth.
    #[test]
    fn masks_and_padding_lengths_are_successive_words_of_shake128() {
        let mut mask = Mask::new(&[0; 16]);
        assert_eq!(mask.padding_len(), 14);
        assert_eq!(mask.length_mask(), 0x4f61);
        assert_eq!(mask.padding_len(), 0x2e61 % 64);
        assert_eq!(mask.length_mask(), 0xffb9);
    }
}
