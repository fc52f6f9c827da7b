//! Standard base64, for HTTP `Proxy-Authorization: Basic`.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0u32;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn encoding_round_trips() {
        for text in [&b""[..], b"a", b"ab", b"abc", b"user:pass"] {
            assert_eq!(super::decode(&super::encode(text)).unwrap(), text);
        }
        assert_eq!(super::encode(b"user:pass"), "dXNlcjpwYXNz");
    }

    #[test]
    fn decodes_padded_and_unpadded_text() {
        assert_eq!(super::decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(super::decode("YQ==").unwrap(), b"a");
        assert_eq!(super::decode("YWI=").unwrap(), b"ab");
        assert!(super::decode("a b").is_none());
    }
}
