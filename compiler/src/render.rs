//! Rendering diagnostics: miette's graphical report for humans, one JSON
//! document for editors and CI.

use std::fmt;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};
use serde_json::json;

use crate::diagnostic::{Diagnostic, Source};

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

/// One diagnostic with its source, as miette sees it.
struct Report<'a> {
    diag: &'a Diagnostic,
    source: NamedSource<String>,
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
        Some(&self.source)
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

/// Renders diagnostics for a human, one after another.
pub fn human(source: &Source, diags: &[Diagnostic], style: Style) -> String {
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false);
    let mut out = String::new();
    for diag in diags {
        let report = Report {
            diag,
            source: NamedSource::new(source.path.clone(), source.text.clone()),
        };
        handler
            .render_report(&mut out, &report)
            .expect("rendering to a String cannot fail");
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
