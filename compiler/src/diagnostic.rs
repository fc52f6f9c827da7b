//! Diagnostics: a code, a severity, a message, the primary span, secondary
//! labels and help. Rendered for humans by miette, or as JSON for editors.

use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use crate::codes;

pub type Span = Range<usize>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub text: String,
}

/// One problem found in a source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// `E0xxx` or `W0xxx`; every code is listed in [`codes::ALL`].
    pub code: &'static str,
    pub severity: Severity,
    /// Plain text, lowercase, no trailing period.
    pub message: String,
    pub span: Span,
    /// The text on the primary span, if any.
    pub label: Option<String>,
    /// Secondary spans, such as the first definition of a duplicate.
    pub labels: Vec<Label>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(code: &'static str, span: Span, message: impl Into<String>) -> Self {
        Self::new(code, Severity::Error, span, message)
    }

    pub fn warning(code: &'static str, span: Span, message: impl Into<String>) -> Self {
        Self::new(code, Severity::Warning, span, message)
    }

    fn new(code: &'static str, severity: Severity, span: Span, message: impl Into<String>) -> Self {
        debug_assert!(
            codes::lookup(code).is_some(),
            "unregistered diagnostic code {code}"
        );
        Diagnostic {
            code,
            severity,
            message: message.into(),
            span,
            label: None,
            labels: Vec::new(),
            help: None,
        }
    }

    pub fn with_label(mut self, text: impl Into<String>) -> Self {
        self.label = Some(text.into());
        self
    }

    pub fn with_secondary(mut self, span: Span, text: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            text: text.into(),
        });
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A source file: its path as given and its text.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: String,
    pub text: String,
    /// The byte offset each line starts at, built on first use, so that
    /// finding the line of an offset is a binary search and not a scan from
    /// the top of the file for every diagnostic.
    line_starts: OnceLock<Vec<usize>>,
}

impl Source {
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> Self {
        Source {
            path: path.into(),
            text: text.into(),
            line_starts: OnceLock::new(),
        }
    }

    fn line_starts(&self) -> &[usize] {
        self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(at, _)| at + 1))
                .collect()
        })
    }

    /// The 0-based line a byte offset is on; an offset past the end is on
    /// the last line.
    pub fn line_index(&self, offset: usize) -> usize {
        self.line_starts().partition_point(|&start| start <= offset) - 1
    }

    /// The byte range of a 0-based line, its `\n` included; empty past the
    /// last line.
    pub fn line_range(&self, line: usize) -> Span {
        let starts = self.line_starts();
        let len = self.text.len();
        let start = starts.get(line).copied().unwrap_or(len);
        let end = starts.get(line + 1).copied().unwrap_or(len);
        start..end
    }

    /// How many lines the text has (a last line without `\n` counts).
    pub fn line_count(&self) -> usize {
        self.line_starts().len()
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let line = self.line_index(offset);
        let line_start = self.line_range(line).start;
        let column = self.text[line_start..offset].chars().count() + 1;
        (line + 1, column)
    }

    /// Whether this source is written in the TOML front end's format.
    pub fn is_toml(&self) -> bool {
        self.path.ends_with(".toml")
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The Levenshtein distance, for did-you-mean suggestions.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a likely typo.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let src = Source::new("a.et", "ab\ncd\n");
        assert_eq!(src.line_col(0), (1, 1));
        assert_eq!(src.line_col(4), (2, 2));
        assert_eq!(src.line_col(6), (3, 1));
        assert_eq!(src.line_col(99), (3, 1));
        assert_eq!(Source::new("b.et", "xé\ny").line_col(3), (1, 3));
    }

    #[test]
    fn lines_are_found_by_their_start() {
        let src = Source::new("a.et", "ab\ncd\nlast");
        assert_eq!(src.line_count(), 3);
        assert_eq!(src.line_index(3), 1);
        assert_eq!(src.line_range(1), 3..6);
        assert_eq!(src.line_range(2), 6..10);
        assert_eq!(src.line_range(3), 10..10);
    }

    #[test]
    fn a_near_miss_is_suggested_and_a_far_one_is_not() {
        assert_eq!(suggest("prxy", ["proxy", "direct"]), Some("proxy"));
        assert_eq!(suggest("zzzzz", ["proxy", "direct"]), None);
    }
}
