//! Rendering diagnostics: miette's graphical report for humans, one JSON
//! document for editors and CI.

use std::fmt;

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, SourceSpan, SpanContents,
};
use serde_json::json;

use crate::diagnostic::{Diagnostic, Source, Span};

/// How human output is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
    /// Terminal width to wrap at.
    pub width: usize,
}

impl Style {
    /// Colour only on a terminal, and never when NO_COLOR is set.
    pub fn detect() -> Style {
        use std::io::IsTerminal;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Style {
            color: !no_color && std::io::stderr().is_terminal(),
            width: 100,
        }
    }

    /// Fixed, without colour: for snapshots.
    pub fn plain() -> Style {
        Style {
            color: false,
            width: 100,
        }
    }
}

/// A source as snippets show it: secret literals masked, and control
/// characters blanked so that a snippet cannot drive the terminal, byte for
/// byte so that every span stays where it was. miette reads it a window of
/// lines at a time, found by the source's line index: a snippet costs the
/// lines it shows, not a scan from the top of the file.
struct Shown<'a> {
    source: &'a Source,
    text: String,
}

/// The longest line, in bytes, a snippet quotes. A diagnostic on or beside a
/// longer line (a minified file) is rendered as one compact line instead: a
/// quoted line would not fit a terminal, and miette cannot place a label
/// past column 65,535.
const MAX_QUOTED_LINE: usize = 1024;

/// The lines of context miette shows each side of a span (its default).
const CONTEXT_LINES: usize = 1;

impl<'a> Shown<'a> {
    fn new(source: &'a Source) -> Self {
        let mut text = crate::secrets::masked(&source.text).into_bytes();
        for at in 0..text.len() {
            let byte = text[at];
            // miette counts a lone `\r` as a line break, the line index does
            // not: showing it as a blank keeps the two in step.
            let lone_return = byte == b'\r' && text.get(at + 1) != Some(&b'\n');
            let control = byte.is_ascii_control() && !matches!(byte, b'\t' | b'\r' | b'\n');
            if lone_return || control {
                text[at] = b' ';
            }
        }
        Shown {
            source,
            // Only ASCII bytes were replaced, by ASCII bytes.
            text: String::from_utf8(text).unwrap_or_default(),
        }
    }

    /// Whether every line a snippet of `span` shows is short enough to quote.
    fn quotable(&self, span: &Span) -> bool {
        let first = self
            .source
            .line_index(span.start)
            .saturating_sub(CONTEXT_LINES);
        let last = self.source.line_index(span.end) + CONTEXT_LINES;
        (first..=last).all(|line| self.source.line_range(line).len() <= MAX_QUOTED_LINE)
    }
}

impl miette::SourceCode for Shown<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        before: usize,
        after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let first = self.source.line_index(span.offset()).saturating_sub(before);
        let last = self.source.line_index(span.offset() + span.len()) + after + 1;
        let start = self.source.line_range(first).start;
        let end = self.source.line_range(last).end.max(start);
        let within = SourceSpan::new((span.offset() - start).into(), span.len());
        let contents = self.text[start..end].read_span(&within, before, after)?;
        Ok(Box::new(Window {
            span: SourceSpan::new(
                (contents.span().offset() + start).into(),
                contents.span().len(),
            ),
            contents,
            first_line: first,
            name: &self.source.path,
        }))
    }
}

/// What miette read from a window of lines, placed back where the window
/// sits in the whole file.
struct Window<'a> {
    contents: Box<dyn SpanContents<'a> + 'a>,
    span: SourceSpan,
    first_line: usize,
    name: &'a str,
}

impl<'a> SpanContents<'a> for Window<'a> {
    fn data(&self) -> &'a [u8] {
        self.contents.data()
    }

    fn span(&self) -> &SourceSpan {
        &self.span
    }

    fn name(&self) -> Option<&str> {
        Some(self.name)
    }

    fn line(&self) -> usize {
        self.contents.line() + self.first_line
    }

    fn column(&self) -> usize {
        self.contents.column()
    }

    fn line_count(&self) -> usize {
        self.contents.line_count() + self.first_line
    }
}

/// One diagnostic with its source, as miette sees it.
struct Report<'a> {
    diag: &'a Diagnostic,
    source: &'a Shown<'a>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.diag, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diag.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diag.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diag.severity {
            crate::Severity::Error => miette::Severity::Error,
            crate::Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diag
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = |s: &std::ops::Range<usize>| SourceSpan::from(s.start..s.end.max(s.start));
        let primary =
            LabeledSpan::new_primary_with_span(self.diag.label.clone(), span(&self.diag.span));
        let secondary = self
            .diag
            .labels
            .iter()
            .map(move |l| LabeledSpan::new_with_span(Some(l.text.clone()), span(&l.span)));
        Some(Box::new(std::iter::once(primary).chain(secondary)))
    }
}

/// Renders diagnostics for a human, one after another, each with a snippet
/// of the source around its spans; see [`Shown`] for what a snippet hides.
/// A diagnostic whose snippet would quote an overlong line, or whose span
/// miette cannot read, is rendered as a [`compact`] line.
pub fn human(source: &Source, diags: &[Diagnostic], style: Style) -> String {
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false)
        .with_context_lines(CONTEXT_LINES);
    let shown = Shown::new(source);
    let mut out = String::new();
    for diag in diags {
        let before = out.len();
        let mut spans = std::iter::once(&diag.span).chain(diag.labels.iter().map(|l| &l.span));
        let rendered = spans.all(|span| shown.quotable(span))
            && handler
                .render_report(
                    &mut out,
                    &Report {
                        diag,
                        source: &shown,
                    },
                )
                .is_ok();
        if !rendered {
            out.truncate(before);
            out.push_str(&compact(source, std::slice::from_ref(diag)));
        }
        out.push('\n');
    }
    out
}

/// Diagnostics as `file:line:column: error[CODE]: message` lines, with their
/// help, and no source snippet: for output that must not quote the source,
/// which may hold secrets (`etc plan` runs in CI logs).
pub fn compact(source: &Source, diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, column) = source.line_col(d.span.start);
        out.push_str(&format!(
            "{}:{line}:{column}: {}[{}]: {}\n",
            source.path,
            d.severity.name(),
            d.code,
            d.message
        ));
        if let Some(help) = &d.help {
            out.push_str(&format!("  help: {help}\n"));
        }
    }
    out
}

/// One line that ends a human check: how many errors and warnings.
pub fn summary(path: &str, diags: &[Diagnostic]) -> String {
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    if errors == 0 && warnings == 0 {
        format!("{path}: ok")
    } else if errors == 0 {
        format!("{path}: ok with {}", plural(warnings, "warning"))
    } else {
        format!(
            "{path}: {}, {}",
            plural(errors, "error"),
            plural(warnings, "warning")
        )
    }
}

/// The JSON form of the diagnostics of several files:
/// `{"format_version": 1, "diagnostics": [...]}`.
pub fn json(files: &[(&Source, &[Diagnostic])]) -> serde_json::Value {
    let diagnostics: Vec<_> = files
        .iter()
        .flat_map(|(source, diags)| diags.iter().map(move |d| diagnostic_json(source, d)))
        .collect();
    json!({ "format_version": 1, "diagnostics": diagnostics })
}

fn diagnostic_json(source: &Source, d: &Diagnostic) -> serde_json::Value {
    let (line, column) = source.line_col(d.span.start);
    let (end_line, end_column) = source.line_col(d.span.end);
    let labels: Vec<_> = d
        .labels
        .iter()
        .map(|l| {
            let (line, column) = source.line_col(l.span.start);
            json!({ "line": line, "column": column, "text": l.text })
        })
        .collect();
    json!({
        "code": d.code,
        "severity": d.severity.name(),
        "message": d.message,
        "file": source.path,
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "labels": labels,
        "help": d.help,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes;

    fn render(path: &str, text: &str, diag: Diagnostic) -> String {
        human(&Source::new(path, text), &[diag], Style::plain())
    }

    #[test]
    fn a_secret_value_never_appears_in_a_rendered_snippet() {
        let text = "[[outbound]]\ntag = \"unused\"\npassword = \"hunter2\" # beside\n";
        let at = text.find("unused").unwrap();
        let warning = Diagnostic::warning(codes::UNROUTED_OUTBOUND, at..at + 6, "nothing routes")
            .with_secondary(
                text.find("beside").unwrap()..text.len() - 1,
                "after the secret",
            );
        let shown = render("c.toml", text, warning);
        assert!(!shown.contains("hunter2"), "{shown}");
        // As wide as the secret, so the label after it still points at `beside`.
        let masked = shown.lines().find(|l| l.contains("password")).unwrap();
        let label = shown.lines().find(|l| l.contains('┬')).unwrap();
        let column = |line: &str, at: usize| line[..at].chars().count();
        assert_eq!(
            column(masked, masked.find("beside").unwrap()),
            column(label, label.find('─').unwrap()),
            "{shown}"
        );
        assert!(
            masked.ends_with("password = \"*******\" # beside"),
            "{shown}"
        );
    }

    #[test]
    fn a_label_past_column_65535_is_rendered_as_one_line_without_a_panic() {
        let text = format!("route {{\n  domain {}x -> direct\n}}\n", "a".repeat(70_000));
        let at = text.find('x').unwrap();
        let warning = Diagnostic::warning(codes::SHADOWED_RULE, at..at + 1, "never matches");
        assert_eq!(
            render("long.et", &text, warning),
            "long.et:2:70010: warning[W0001]: never matches\n\n"
        );
    }

    #[test]
    fn snippets_far_into_a_file_show_their_own_lines_and_numbers() {
        let text: String = (1..=5000).map(|n| format!("line{n} = {n}\n")).collect();
        let at = text.find("line4321 ").unwrap();
        let shown = render(
            "big.toml",
            &text,
            Diagnostic::error(codes::SYNTAX, at..at + 8, "here"),
        );
        assert!(shown.contains("[big.toml:4321:1]"), "{shown}");
        assert!(shown.contains("4320 │ line4320 = 4320"), "{shown}");
        assert!(shown.contains("4322 │ line4322 = 4322"), "{shown}");
        assert!(!shown.contains("4323"), "{shown}");
    }

    #[test]
    fn control_characters_in_a_snippet_are_shown_as_blanks() {
        let text = "tag = \"a\u{1b}[31mred\"\nport = 1\n";
        let shown = render(
            "c.toml",
            text,
            Diagnostic::error(codes::SYNTAX, 0..3, "here"),
        );
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(shown.contains("tag = \"a [31mred\""), "{shown}");
    }
}
