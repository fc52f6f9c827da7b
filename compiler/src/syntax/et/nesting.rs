//! A bound on how deep blocks and lists nest, checked before parsing.
//!
//! The parser and the tree walk recurse once per level, so a file of a
//! million `[` would exhaust the stack; no configuration needs more than a
//! few levels.

use crate::codes;
use crate::diagnostic::Diagnostic;

/// The deepest nesting of `{ }` and `[ ]` a file may have.
pub(super) const MAX_DEPTH: usize = 32;

/// A syntax error at the first bracket that opens a level too deep.
pub(super) fn too_deep(text: &str) -> Option<Diagnostic> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut in_comment = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if in_comment {
            in_comment = c != '\n';
        } else if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' | '\n' => in_string = false,
                _ => {}
            }
        } else {
            match c {
                '#' => in_comment = true,
                '"' => in_string = true,
                '{' | '[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Some(Diagnostic::error(
                            codes::SYNTAX,
                            i..i + 1,
                            format!("blocks and lists nest more than {MAX_DEPTH} deep"),
                        ));
                    }
                }
                '}' | ']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    None
}
