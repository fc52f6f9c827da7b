//! Helpers the crate's tests share.

/// Bytes from hex, whitespace ignored (test vectors as their RFCs print them).
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let text: String = text.split_whitespace().collect();
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}
