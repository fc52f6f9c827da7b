//! Secret literals in a source, found by the keys that hold them, so that no
//! output quotes one: rendered snippets show them masked, and messages about
//! their values do not repeat them.
//!
//! The scan is lexical and shared by both front ends (their `key = value`,
//! strings, lists and comments look alike), so it works on a file that does
//! not parse too: a syntax error beside an inline password must not print
//! it. A value of a secret key is secret whatever its kind: a string, a bare
//! word or number (a password written without quotes), every element of a
//! list. `env("NAME")`, `file("path")` and TOML's `{ env = "NAME" }` name
//! where a secret is, and are left as they are.

use crate::diagnostic::Span;

/// The keys whose values are [`crate::config::SecretValue`]s, in either
/// front end, as a key or the last part of a dotted TOML key.
const SECRET_KEYS: &[&str] = &[
    "pass",
    "password",
    "passwords",
    "id",
    "ids",
    "psk",
    "users",
    "identity_psks",
    "private_key",
    "preshared_key",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A string, its quotes included.
    Str,
    /// A run of anything else that is not blank, punctuation or a quote.
    Bare,
    Punct(u8),
}

struct Token {
    kind: Kind,
    span: Span,
    /// Whether a line break comes between this token and the one before.
    first_on_line: bool,
}

/// The spans of every secret literal: a string's contents without its
/// quotes, or a whole bare word.
pub fn spans(text: &str) -> Vec<Span> {
    let tokens = tokens(text);
    let mut secret = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_key(&tokens, i) && SECRET_KEYS.contains(&key_name(text, &tokens[i])) {
            i = value(text, &tokens, i + 2, &mut secret);
        } else {
            i += 1;
        }
    }
    secret
}

/// The text with every character of every secret literal replaced by as
/// many `*` as it has bytes: every offset, and so every span and label,
/// stays where it was, and so do the line breaks.
pub fn masked(text: &str) -> String {
    let mut out = text.as_bytes().to_vec();
    for span in spans(text) {
        for byte in &mut out[span] {
            if !matches!(byte, b'\n' | b'\r') {
                *byte = b'*';
            }
        }
    }
    // Every span starts and ends on a character boundary and every byte in it
    // became ASCII, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// Whether a span touches a secret literal.
pub fn touches(secrets: &[Span], span: &Span) -> bool {
    secrets
        .iter()
        .any(|s| s.start < span.end.max(span.start + 1) && span.start < s.end)
}

/// Whether token `i` is a key: a word or string followed by `=`.
fn is_key(tokens: &[Token], i: usize) -> bool {
    matches!(tokens[i].kind, Kind::Str | Kind::Bare)
        && tokens
            .get(i + 1)
            .is_some_and(|t| t.kind == Kind::Punct(b'='))
}

/// A key's name: a quoted key's contents, or a bare key's last dotted part.
fn key_name<'t>(text: &'t str, token: &Token) -> &'t str {
    let raw = &text[token.span.clone()];
    match token.kind {
        Kind::Str => raw.trim_matches(|c| c == '"' || c == '\''),
        _ => raw.rsplit('.').next().unwrap_or(raw),
    }
}

/// Collects the secret literals of the value starting at token `i`, and
/// returns the index of the token after it.
fn value(text: &str, tokens: &[Token], i: usize, secret: &mut Vec<Span>) -> usize {
    let Some(token) = tokens.get(i) else {
        return i;
    };
    match token.kind {
        Kind::Str => {
            secret.push(string_contents(text, &token.span));
            i + 1
        }
        // `env("NAME")` and `file("path")`: a reference, not a secret.
        Kind::Bare
            if tokens
                .get(i + 1)
                .is_some_and(|t| t.kind == Kind::Punct(b'(')) =>
        {
            closing(tokens, i + 1, b'(', b')')
        }
        Kind::Bare => {
            secret.push(token.span.clone());
            i + 1
        }
        Kind::Punct(b'[') => {
            let mut at = i + 1;
            while let Some(token) = tokens.get(at) {
                match token.kind {
                    Kind::Punct(b']') => return at + 1,
                    Kind::Punct(b',') => at += 1,
                    // `{ env = "NAME" }` in a list: a reference.
                    Kind::Punct(b'{') => at = closing(tokens, at, b'{', b'}'),
                    // A key cannot be in a list: this one is unclosed.
                    _ if is_key(tokens, at) => return at,
                    _ => at = value(text, tokens, at, secret).max(at + 1),
                }
            }
            at
        }
        // A table, such as TOML's `{ env = "NAME" }`, is scanned as keys.
        _ => i,
    }
}

/// The index after the token that closes the bracket opened at `open`, or,
/// when it is not closed on its line, of the first token of the next line.
fn closing(tokens: &[Token], open: usize, left: u8, right: u8) -> usize {
    let mut depth = 0usize;
    for (at, token) in tokens.iter().enumerate().skip(open) {
        if at > open && token.first_on_line {
            return at;
        }
        match token.kind {
            Kind::Punct(c) if c == left => depth += 1,
            Kind::Punct(c) if c == right => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    tokens.len()
}

/// A string's contents: inside its quotes, one or three of them, whether or
/// not it is closed.
fn string_contents(text: &str, span: &Span) -> Span {
    let raw = &text[span.clone()];
    let quote = &raw[..1];
    let width = if raw.starts_with(&quote.repeat(3)) {
        3
    } else {
        1
    };
    let closed = raw.len() >= 2 * width && raw.ends_with(&quote.repeat(width));
    let start = span.start + width;
    let end = if closed { span.end - width } else { span.end };
    start..end.max(start)
}

/// Splits a text into strings, bare words and punctuation; blanks and
/// comments are skipped. Unclosed strings end at the end of their line (or,
/// for TOML's triple-quoted ones, of the text).
fn tokens(text: &str) -> Vec<Token> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut first_on_line = true;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        let kind = match bytes[i] {
            b'\n' => {
                first_on_line = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'#' => {
                i = line_end(bytes, i);
                continue;
            }
            quote @ (b'"' | b'\'') => {
                i = string_end(bytes, i, quote);
                Kind::Str
            }
            c if PUNCTUATION.contains(&c) => {
                i += 1;
                Kind::Punct(c)
            }
            _ => {
                while i < bytes.len()
                    && !matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n' | b'#' | b'"' | b'\'')
                    && !PUNCTUATION.contains(&bytes[i])
                {
                    i += 1;
                }
                Kind::Bare
            }
        };
        out.push(Token {
            kind,
            span: start..i,
            first_on_line,
        });
        first_on_line = false;
    }
    out
}

const PUNCTUATION: &[u8] = b"=[]{},()";

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |n| from + n)
}

/// The offset after the string that opens at `start`.
fn string_end(bytes: &[u8], start: usize, quote: u8) -> usize {
    let escapes = quote == b'"';
    let triple = bytes[start..].starts_with(&[quote; 3]);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if escapes => i += 2,
            b'\n' if !triple => return i,
            b if b == quote => {
                if !triple {
                    return i + 1;
                }
                if bytes[i..].starts_with(&[quote; 3]) {
                    // A closing `"""` may be followed by one or two more quotes
                    // that belong to the string.
                    let run = bytes[i..].iter().take_while(|&&b| b == quote).count();
                    return i + run.min(5);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every secret slot of both front ends, each holding a distinct marker.
    const TOML: &str = r#"
[[inbound]]
tag = "in"
protocol = "socks"
port = 1080
settings.password = "marker-1"
[inbound.settings]
passwords = ["marker-2", 'marker-3', { env = "NOT_SECRET" }]
id = """marker-4"""
ids = [
  "marker-5",  # a comment "with quotes"
  marker-6,
]
psk = marker-7
users = [987654321]
accounts = [{ user = "alice", pass = "marker-8" }]
obfs = { type = "salamander", password = "marker-9" }

[outbound.settings]
pass = "marker-10\"still"
identity_psks = ["marker-11"]
private_key = { file = "keys/not-secret" }
preshared_key = "marker-12
"password" = "marker-13"
"#;

    const ET: &str = r#"
inbound in trojan {
  password = marker-1 passwords = ["marker-2", env("NOT_SECRET")]
  account { user = "alice" pass = "marker-3" }
  obfs { type = salamander  password = 123456 }
}
outbound out vless { server = a.example:443  id = "marker-4" }
outbound wg wireguard { private_key = file("not-secret")  preshared_key = "marker-5" }
"#;

    fn check(text: &str, markers: usize) {
        let masked = masked(text);
        assert_eq!(masked.len(), text.len());
        assert_eq!(masked.lines().count(), text.lines().count());
        for n in 1..=markers {
            assert!(
                !masked.contains(&format!("marker-{n}")),
                "marker-{n} shows in\n{masked}"
            );
        }
        assert!(!masked.contains("987654321") && !masked.contains("123456"));
        assert!(masked.contains("alice") && masked.contains("NOT_SECRET"));
        assert!(masked.contains("not-secret") && masked.contains("salamander"));
    }

    #[test]
    fn every_secret_slot_is_masked_in_toml() {
        check(TOML, 13);
        assert!(masked(TOML).contains(r#"settings.password = "********""#));
    }

    #[test]
    fn every_secret_slot_is_masked_in_et() {
        check(ET, 5);
        assert!(masked(ET).contains("password = ******** passwords"));
    }

    #[test]
    fn a_mask_keeps_every_offset_and_character_boundary() {
        let text = "password = \"pässwörd\" # x\nport = 1";
        let masked = masked(text);
        assert_eq!(masked, "password = \"**********\" # x\nport = 1");
        assert_eq!(spans(text), vec![12..22]);
    }

    #[test]
    fn touching_is_overlap_and_an_empty_span_touches_what_it_points_at() {
        let secrets = vec![5..9, 20..24];
        assert!(touches(&secrets, &(8..12)));
        assert!(touches(&secrets, &(5..5)));
        assert!(!touches(&secrets, &(9..12)));
        assert!(!touches(&secrets, &(0..5)));
    }
}
