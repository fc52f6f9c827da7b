//! QUIC variable-length integers (RFC 9000, 16): every length in the
//! Hysteria 2 frames is one.

/// The largest value a varint holds (62 bits).
pub const MAX: u64 = (1 << 62) - 1;

/// How many bytes `value` takes.
pub fn len(value: u64) -> usize {
    match value {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Appends `value` (at most [`MAX`]; larger values are clamped to it).
pub fn put(out: &mut Vec<u8>, value: u64) {
    let value = value.min(MAX);
    match len(value) {
        1 => out.push(value as u8),
        2 => out.extend_from_slice(&((value as u16) | 0x4000).to_be_bytes()),
        4 => out.extend_from_slice(&((value as u32) | 0x8000_0000).to_be_bytes()),
        _ => out.extend_from_slice(&(value | 0xc000_0000_0000_0000).to_be_bytes()),
    }
}

/// Writes `value` at the start of `out` and returns its length; `None`
/// when `out` is too short.
pub fn write(out: &mut [u8], value: u64) -> Option<usize> {
    let value = value.min(MAX);
    let n = len(value);
    let bytes = match n {
        1 => return out.first_mut().map(|b| *b = value as u8).map(|()| 1),
        2 => &((value as u16) | 0x4000).to_be_bytes()[..],
        4 => &((value as u32) | 0x8000_0000).to_be_bytes()[..],
        _ => &(value | 0xc000_0000_0000_0000).to_be_bytes()[..],
    };
    out.get_mut(..n)?.copy_from_slice(bytes);
    Some(n)
}

/// Reads a varint from the start of `buf`: the value and its length, or
/// `None` when `buf` ends first.
pub fn read(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let n = 1usize << (first >> 6);
    let bytes = buf.get(..n)?;
    let mut value = u64::from(first & 0x3f);
    for b in &bytes[1..] {
        value = (value << 8) | u64::from(*b);
    }
    Some((value, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_width() {
        for value in [0, 63, 64, 16_383, 16_384, 1_073_741_823, 1_073_741_824, MAX] {
            let mut out = Vec::new();
            put(&mut out, value);
            assert_eq!(out.len(), len(value));
            assert_eq!(read(&out), Some((value, out.len())));
            let mut fixed = [0u8; 8];
            assert_eq!(write(&mut fixed, value), Some(out.len()));
            assert_eq!(&fixed[..out.len()], &out[..]);
            assert_eq!(read(&out[..out.len() - 1]), None);
        }
    }

    #[test]
    fn the_tcp_request_id_is_two_bytes() {
        let mut out = Vec::new();
        put(&mut out, 0x401);
        assert_eq!(out, [0x44, 0x01]);
    }
}
