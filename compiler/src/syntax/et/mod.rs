//! The `.et` front end: pest parses the text into a tree whose literals are
//! already typed; the modules below walk the tree into the same [`Config`]
//! the TOML front end produces, with spans into the `.et` text.
//!
//! A syntax error stops the parse (the tree is not there to walk). After a
//! successful parse every unknown key, literal of the wrong kind, missing key
//! and duplicate is reported, not only the first.

mod body;
mod error;
mod nesting;
mod route;
mod statements;
mod value;

#[cfg(test)]
mod tests;

use pest::Parser;
use pest_derive::Parser;

use crate::config::Config;
use crate::diagnostic::{Diagnostic, Span};

#[derive(Parser)]
#[grammar = "../grammar/etemenanki.pest"]
struct EtParser;

/// Parses a `.et` configuration.
pub fn parse(text: &str) -> Result<Config, Vec<Diagnostic>> {
    if let Some(too_deep) = nesting::too_deep(text) {
        return Err(vec![too_deep]);
    }
    let statements = match EtParser::parse(Rule::file, text) {
        Ok(pairs) => pairs,
        Err(err) => return Err(vec![error::syntax(&err, text)]),
    };
    let mut cx = Cx {
        text,
        diagnostics: Vec::new(),
    };
    let config = statements::file(&mut cx, statements);
    if cx.diagnostics.is_empty() {
        Ok(config)
    } else {
        Err(cx.diagnostics)
    }
}

/// What the tree walk carries: the text, for slices and messages, and the
/// problems found so far.
struct Cx<'i> {
    text: &'i str,
    diagnostics: Vec<Diagnostic>,
}

impl Cx<'_> {
    fn report(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }
}

fn span_of(pair: &pest::iterators::Pair<'_, Rule>) -> Span {
    let s = pair.as_span();
    s.start()..s.end()
}
