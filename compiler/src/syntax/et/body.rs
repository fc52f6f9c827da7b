//! Blocks `{ ... }`: their settings and nested blocks, checked against the
//! keys the block accepts. Unknown keys, duplicates and a setting written
//! as a block (or the other way round) are reported here, all of them, and
//! the builders then read the keys that are left.

use pest::iterators::Pair;

use super::value::Value;
use super::{span_of, Cx, Rule};
use crate::codes;
use crate::diagnostic::{suggest, Diagnostic, Span};

/// How a key is written.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// `key = value`, at most once.
    Setting,
    /// `key { ... }`, at most once.
    Block,
    /// `key { ... }`, any number of times.
    Blocks,
}

pub(super) struct Item {
    pub key: String,
    pub key_span: Span,
    pub content: Content,
}

pub(super) enum Content {
    Setting(Value),
    Block(Body),
}

pub(super) struct Body {
    /// From the block's key (or the statement's keyword) to its `}`.
    pub span: Span,
    /// The block's key or the statement's keyword, where a missing key is
    /// reported.
    pub head: Span,
    pub items: Vec<Item>,
}

impl Cx<'_> {
    /// Reads a `body` pair; `head` names the block for diagnostics.
    pub(super) fn body(&mut self, pair: Pair<'_, Rule>, span: Span, head: Span) -> Body {
        let mut items = Vec::new();
        for item in pair.into_inner() {
            let kind = item.as_rule();
            if kind != Rule::block && kind != Rule::setting {
                continue;
            }
            let item_span = span_of(&item);
            let mut parts = item.into_inner();
            let key = parts.next().expect("an item starts with a key");
            let key_span = span_of(&key);
            let key_text = key.as_str().to_owned();
            let rest = parts.find(|p| matches!(p.as_rule(), Rule::value | Rule::body));
            let rest = rest.expect("an item has a value or a body");
            let content = if kind == Rule::setting {
                Content::Setting(self.value(rest))
            } else {
                Content::Block(self.body(rest, item_span, key_span.clone()))
            };
            items.push(Item {
                key: key_text,
                key_span,
                content,
            });
        }
        Body { span, head, items }
    }

    /// Checks a body against the keys it accepts, reporting every unknown
    /// key, duplicate and misshapen item, and returns what is left.
    pub(super) fn fields<'b>(
        &mut self,
        body: &'b Body,
        keys: &[(&'static str, Shape)],
    ) -> Fields<'b> {
        let mut kept: Vec<&'b Item> = Vec::new();
        for item in &body.items {
            let Some(&(_, shape)) = keys.iter().find(|(k, _)| *k == item.key) else {
                let names: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
                self.report(unknown_field(&item.key, item.key_span.clone(), &names));
                continue;
            };
            match (&item.content, shape) {
                (Content::Setting(_), Shape::Block | Shape::Blocks) => {
                    self.report(
                        Diagnostic::error(
                            codes::WRONG_TYPE,
                            item.key_span.clone(),
                            format!(
                                "invalid type: setting, expected a block `{} {{ ... }}`",
                                item.key
                            ),
                        )
                        .with_help(format!("write `{} {{ ... }}` without `=`", item.key)),
                    );
                    continue;
                }
                (Content::Block(_), Shape::Setting) => {
                    self.report(
                        Diagnostic::error(
                            codes::WRONG_TYPE,
                            item.key_span.clone(),
                            format!(
                                "invalid type: block, expected a setting `{} = ...`",
                                item.key
                            ),
                        )
                        .with_help(format!("write `{} = <value>`", item.key)),
                    );
                    continue;
                }
                _ => {}
            }
            if shape != Shape::Blocks {
                if let Some(first) = kept.iter().find(|k| k.key == item.key) {
                    self.report(duplicate(
                        &item.key,
                        item.key_span.clone(),
                        first.key_span.clone(),
                    ));
                    continue;
                }
            }
            kept.push(item);
        }
        Fields {
            head: body.head.clone(),
            items: kept,
        }
    }

    /// Reports a required key that is absent, in serde's words.
    pub(super) fn missing(&mut self, head: Span, key: &str) {
        self.report(Diagnostic::error(
            codes::MISSING_FIELD,
            head,
            format!("missing field `{key}`"),
        ));
    }
}

/// The checked items of one body.
pub(super) struct Fields<'b> {
    pub head: Span,
    items: Vec<&'b Item>,
}

impl<'b> Fields<'b> {
    pub fn setting(&self, key: &str) -> Option<&'b Value> {
        self.items
            .iter()
            .find(|i| i.key == key)
            .and_then(|i| match &i.content {
                Content::Setting(v) => Some(v),
                Content::Block(_) => None,
            })
    }

    pub fn block(&self, key: &str) -> Option<&'b Body> {
        self.blocks(key).next()
    }

    pub fn blocks<'s>(&'s self, key: &'s str) -> impl Iterator<Item = &'b Body> + 's {
        self.items
            .iter()
            .filter(move |i| i.key == key)
            .filter_map(|i| match &i.content {
                Content::Block(b) => Some(b),
                Content::Setting(_) => None,
            })
    }

    /// The span of a key's first occurrence.
    pub fn key_span(&self, key: &str) -> Option<Span> {
        self.items
            .iter()
            .find(|i| i.key == key)
            .map(|i| i.key_span.clone())
    }
}

/// serde's text: ``unknown field `x`, expected one of `a`, `b` ``, with a
/// did-you-mean when a key is close.
pub(super) fn unknown_field(key: &str, span: Span, expected: &[&str]) -> Diagnostic {
    let message = format!("unknown field `{key}`, {}", one_of(expected));
    let mut d = Diagnostic::error(codes::UNKNOWN_KEY, span, message);
    if let Some(s) = suggest(key, expected.iter().copied()) {
        d = d.with_help(format!("did you mean `{s}`?"));
    }
    d
}

pub(super) fn duplicate(key: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::error(codes::DUPLICATE_KEY, span, format!("duplicate key `{key}`"))
        .with_label("set again here")
        .with_secondary(first, "first set here")
}

/// serde's `OneOf`: `expected `a``, `expected `a` or `b``,
/// `expected one of `a`, `b`, `c``.
pub(super) fn one_of(names: &[&str]) -> String {
    match names {
        [] => "there are no fields".to_owned(),
        [one] => format!("expected `{one}`"),
        [a, b] => format!("expected `{a}` or `{b}`"),
        _ => {
            let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("expected one of {}", quoted.join(", "))
        }
    }
}
