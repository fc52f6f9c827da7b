//! Syntax errors: pest's positives and negatives turned into words.
//!
//! pest already reports the deepest position it reached; this module names
//! what it expected there in the operator's terms and what it found instead.

use pest::error::{Error, ErrorVariant, InputLocation};

use super::Rule;
use crate::codes;
use crate::diagnostic::Diagnostic;

pub(super) fn syntax(err: &Error<Rule>, text: &str) -> Diagnostic {
    let at = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((start, _)) => start,
    }
    .min(text.len());
    let found = token_at(text, at);
    let found_text = if found.is_empty() {
        "end of file".to_owned()
    } else {
        format!("`{found}`")
    };
    let message = match &err.variant {
        ErrorVariant::ParsingError {
            positives,
            negatives,
        } => {
            let expected = words(positives);
            if !expected.is_empty() {
                format!("expected {}, found {found_text}", join(&expected))
            } else if !negatives.is_empty() {
                format!(
                    "unexpected {found_text}, expected {}",
                    join(&words(negatives))
                )
            } else {
                format!("unexpected {found_text}")
            }
        }
        ErrorVariant::CustomError { message } => message.clone(),
    };
    let mut diagnostic = Diagnostic::error(codes::SYNTAX, at..at + found.len(), message);
    if let Some(help) = help(text, at, found) {
        diagnostic = diagnostic.with_help(help);
    }
    diagnostic
}

/// The token at a byte offset: a word, or one character.
fn token_at(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    let word_len = rest
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '-')))
        .map_or(rest.len(), |(i, _)| i);
    if word_len > 0 {
        return &rest[..floor(rest, word_len.min(40))];
    }
    rest.chars().next().map_or("", |c| &rest[..c.len_utf8()])
}

fn floor(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// A hint for the mistakes people make most: an unclosed string, a
/// missing `=`.
fn help(text: &str, at: usize, found: &str) -> Option<String> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..at];
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    let opens_unclosed = found == "\"" && !text[at + 1..line_end].contains('"');
    if opens_unclosed || before.matches('"').count() % 2 == 1 {
        return Some("a string ends with `\"` on the line it starts".to_owned());
    }
    if found == ":" && before.trim_end().ends_with(|c: char| c.is_alphanumeric()) {
        return Some("keys are set with `=`, as in `port = 1080`".to_owned());
    }
    None
}

/// Each rule as the operator would name it, without repeats.
fn words(rules: &[Rule]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in rules {
        let word = describe(*r);
        if !out.contains(&word) {
            out.push(word);
        }
    }
    // "end of file" reads best last.
    out.sort_by_key(|w| *w == "end of file");
    out
}

fn describe(r: Rule) -> &'static str {
    match r {
        Rule::EOI => "end of file",
        Rule::inbound
        | Rule::outbound
        | Rule::balancer
        | Rule::route
        | Rule::section
        | Rule::top_setting
        | Rule::unknown_statement
        | Rule::kw_inbound
        | Rule::kw_outbound
        | Rule::kw_balancer
        | Rule::kw_route
        | Rule::kw_drain
        | Rule::statement_key
        | Rule::section_name => "a statement",
        Rule::tag => "a tag",
        Rule::protocol => "a protocol",
        Rule::strategy => "a strategy",
        Rule::key | Rule::block | Rule::setting | Rule::route_setting => "a key",
        Rule::body | Rule::lbrace => "`{`",
        Rule::rbrace => "`}`",
        Rule::lbracket => "`[`",
        Rule::rbracket => "`]`",
        Rule::equals => "`=`",
        Rule::arrow => "`->`",
        Rule::comma => "`,`",
        Rule::kw_and => "`and`",
        Rule::kw_after => "`after`",
        Rule::kw_close => "`close`",
        Rule::kw_default | Rule::default_rule | Rule::route_rule | Rule::condition => "a rule",
        Rule::value
        | Rule::lone_value
        | Rule::close_after
        | Rule::grace
        | Rule::ip
        | Rule::ipv4
        | Rule::ipv6
        | Rule::host
        | Rule::hostname
        | Rule::socket_addr
        | Rule::url
        | Rule::cidr
        | Rule::port_range
        | Rule::integer
        | Rule::digits
        | Rule::duration
        | Rule::unit
        | Rule::boolean => "a value",
        Rule::list => "a list",
        Rule::string | Rule::string_inner | Rule::escape => "a string",
        Rule::secret | Rule::secret_kind => "`env(\"NAME\")` or `file(\"path\")`",
        Rule::name => "a name",
        // Silent rules: pest never reports them.
        Rule::file
        | Rule::statement
        | Rule::keyword
        | Rule::name_char
        | Rule::WHITESPACE
        | Rule::COMMENT => "a value",
    }
}

/// `a`, `a or b`, `a, b or c`.
fn join(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
