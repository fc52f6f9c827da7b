//! The TOML front end: [`Config`]'s schema, deserialized with serde so
//! that unknown keys, wrong types and missing keys get serde's exact texts.

use crate::config::Config;
use crate::diagnostic::Diagnostic;
use crate::{codes, secrets};

/// Parses a TOML configuration. serde stops at the first problem, so this
/// returns at most one diagnostic; the checks after lowering report all.
pub fn parse(text: &str) -> Result<Config, Vec<Diagnostic>> {
    toml::from_str(text).map_err(|err| vec![diagnostic(&err, text)])
}

fn diagnostic(err: &toml::de::Error, text: &str) -> Diagnostic {
    let span = err.span().unwrap_or(0..0);
    let span = span.start.min(text.len())..span.end.min(text.len());
    // toml has no words for some characters (a lone `\r`): say which.
    let message = match err.message().trim_end() {
        "" => match text.get(span.start..).and_then(|rest| rest.chars().next()) {
            Some(c) => format!("unexpected character `{}`", c.escape_debug()),
            None => "unexpected end of file".to_owned(),
        },
        message => message.to_owned(),
    };
    let code = if message.starts_with("unknown field") {
        codes::UNKNOWN_KEY
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        codes::WRONG_TYPE
    } else if message.starts_with("missing field") {
        codes::MISSING_FIELD
    } else if message.starts_with("duplicate key") {
        codes::DUPLICATE_KEY
    } else {
        codes::SYNTAX
    };
    let message = if secrets::touches(&secrets::spans(text), &span) {
        unquoted(&message)
    } else {
        message
    };
    let mut diag = Diagnostic::error(code, span, message.clone());
    if code == codes::UNKNOWN_KEY {
        if let Some(help) = unknown_key_help(&message) {
            diag = diag.with_help(help);
        }
    }
    diag
}

/// serde's ``invalid type: integer `987654321`, expected …`` without the
/// value, for a value in a secret slot: it may be the secret itself.
fn unquoted(message: &str) -> String {
    let Some((what, rest)) = message.split_once(": ") else {
        return message.to_owned();
    };
    let (found, expected) = rest.split_once(", expected").unwrap_or((rest, ""));
    let kind = found.split([' ', '`', '"']).next().unwrap_or_default();
    let kind = match kind {
        "floating" => "floating point",
        other => other,
    };
    match expected {
        "" => format!("{what}: {kind}"),
        _ => format!("{what}: {kind}, expected{expected}"),
    }
}

/// `unknown field `x`, expected one of `a`, `b`` -> "did you mean `a`?"
fn unknown_key_help(message: &str) -> Option<String> {
    let mut ticks = message.split('`').skip(1).step_by(2);
    let key = ticks.next()?;
    let expected: Vec<&str> = ticks.collect();
    crate::diagnostic::suggest(key, expected.iter().copied())
        .map(|s| format!("did you mean `{s}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> Diagnostic {
        parse(text).unwrap_err().remove(0)
    }

    #[test]
    fn an_unknown_balancer_key_gets_serdes_text_and_a_suggestion() {
        let d = error(
            r#"
[[balancer]]
tag = "proxy"
outbounds = ["a"]
probe_intervall = 10
"#,
        );
        assert_eq!(d.code, codes::UNKNOWN_KEY);
        assert_eq!(
            d.message,
            "unknown field `probe_intervall`, expected one of `tag`, `outbounds`, `strategy`, `probe_interval`, `probe_timeout`"
        );
        assert_eq!(d.help.as_deref(), Some("did you mean `probe_interval`?"));
    }

    #[test]
    fn a_duration_written_as_a_string_is_a_type_error() {
        let d = error(
            r#"
[[balancer]]
tag = "proxy"
outbounds = ["a"]
probe_interval = "30s"
"#,
        );
        assert_eq!(d.message, r#"invalid type: string "30s", expected u64"#);
        assert_eq!(d.code, codes::WRONG_TYPE);
    }

    #[test]
    fn a_negative_interval_is_an_invalid_value() {
        let d = error(
            r#"
[[balancer]]
tag = "proxy"
outbounds = ["a"]
probe_timeout = -1
"#,
        );
        assert_eq!(d.message, "invalid value: integer `-1`, expected u64");
    }

    #[test]
    fn a_secret_written_without_quotes_is_never_echoed_in_a_message() {
        for (value, found) in [
            ("987654321", "integer"),
            ("9876.54321", "floating point"),
            ("true", "boolean"),
        ] {
            let text = format!(
                "[[outbound]]\ntag = \"t\"\nprotocol = \"trojan\"\n[outbound.settings]\npassword = {value}\n"
            );
            let d = error(&text);
            assert!(!d.message.contains(value), "{}", d.message);
            assert!(
                d.message
                    .starts_with(&format!("invalid type: {found}, expected")),
                "{}",
                d.message
            );
        }
        let d = error("[[inbound]]\ntag = \"t\"\nprotocol = \"trojan\"\nport = 1\nsettings.passwords = 24681357\n");
        assert_eq!(d.message, "invalid type: integer, expected a sequence");
    }

    #[test]
    fn a_character_toml_has_no_words_for_is_named() {
        let d = error("# a comment\rwith a lone carriage return\n");
        assert_eq!(d.message, "unexpected character `\\r`");
        assert_eq!(d.span, 11..12);
    }

    #[test]
    fn a_balancer_without_outbounds_is_a_missing_field() {
        let d = error("[[balancer]]\ntag = \"proxy\"\n");
        assert_eq!(d.message, "missing field `outbounds`");
        assert_eq!(d.code, codes::MISSING_FIELD);
    }
}
