//! Standard base64 decoding, for HTTP `Proxy-Authorization: Basic`.

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
    fn decodes_padded_and_unpadded_text() {
        assert_eq!(super::decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(super::decode("YQ==").unwrap(), b"a");
        assert_eq!(super::decode("YWI=").unwrap(), b"ab");
        assert!(super::decode("a b").is_none());
    }
}
