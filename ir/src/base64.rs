//! Base64 (RFC 4648), shared by the compiler (Shadowsocks 2022 and WireGuard
//! keys) and the runtime (HTTP `Proxy-Authorization: Basic`).

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Standard alphabet, padded.
pub fn encode(bytes: &[u8]) -> String {
    encode_with(bytes, ALPHABET, true)
}

/// URL-safe alphabet, unpadded (RFC 4648 section 5; Go's
/// `RawURLEncoding`), as WebSocket early data travels in a header.
pub fn encode_url(bytes: &[u8]) -> String {
    encode_with(bytes, URL_ALPHABET, false)
}

fn encode_with(bytes: &[u8], alphabet: &[u8; 64], pad: bool) -> String {
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
                out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
    out
}

/// Standard or URL-safe alphabet, padding optional. Leftover bits that are
/// not zero padding make the text invalid, so one text decodes one way only.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    (bits < 6 && acc & ((1 << bits) - 1) == 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        for text in [&b""[..], b"a", b"ab", b"abc", b"user:pass", &[0xff; 32]] {
            assert_eq!(decode(&encode(text)).unwrap(), text);
        }
        assert_eq!(encode(b"user:pass"), "dXNlcjpwYXNz");
    }

    #[test]
    fn url_encoding_is_unpadded_with_the_url_alphabet_and_round_trips() {
        assert_eq!(encode_url(&[0xfb, 0xff]), "-_8");
        assert_eq!(encode_url(b"a"), "YQ");
        for text in [&b""[..], b"a", b"ab", b"abc", &[0xfe; 31]] {
            assert_eq!(decode(&encode_url(text)).unwrap(), text);
        }
    }

    #[test]
    fn decodes_padded_unpadded_and_url_safe_text() {
        assert_eq!(decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(decode("YQ==").unwrap(), b"a");
        assert_eq!(decode("YWI=").unwrap(), b"ab");
        assert_eq!(decode("-_8").unwrap(), decode("+/8").unwrap());
        assert!(decode("a b").is_none());
        assert!(decode("YR").is_none(), "leftover bits that are not zero");
    }
}
