//! Domain matching: the exact and suffix matchers share one map of names
//! and their suffixes (a suffix trie flattened into a hash map), and
//! keywords are one Aho-Corasick automaton. A lookup probes the map once a
//! label and scans the name once, whatever the number of rules or domains.
//!
//! Names compare ASCII case-insensitively with one trailing dot ignored:
//! rules are normalised when the table is built ([`normalize_domain`]), and
//! a looked-up name is folded into a buffer on the stack, so a lookup never
//! allocates.

use std::collections::HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::hash::FxBuild;

/// The longest label a domain name can hold (RFC 1035).
const MAX_LABEL: usize = 63;
/// The longest domain name in text form, without the trailing dot.
const MAX_NAME: usize = 253;

/// What makes a text no domain name.
enum Fault<'a> {
    Empty,
    LeadingDot,
    TooLong,
    Holds(char),
    EmptyLabel,
    LongLabel(&'a str),
}

/// The first reason `name` (without its trailing dot) is no domain name:
/// letters, digits, `-`, `_` and dots, labels of 1 to 63 characters, at most
/// 253 in all. Allocates nothing, so a client's request is checked with it.
fn fault(name: &str) -> Option<Fault<'_>> {
    if name.is_empty() {
        return Some(Fault::Empty);
    }
    if name.starts_with('.') {
        return Some(Fault::LeadingDot);
    }
    if name.len() > MAX_NAME {
        return Some(Fault::TooLong);
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Some(Fault::Holds(bad));
    }
    name.split('.').find_map(|label| match label.len() {
        0 => Some(Fault::EmptyLabel),
        n if n > MAX_LABEL => Some(Fault::LongLabel(label)),
        _ => None,
    })
}

/// Whether `text` is a domain name, one trailing dot allowed: what a
/// client's destination must be when it is not an IP address.
pub(super) fn is_domain_name(text: &str) -> bool {
    fault(trim_name(text)).is_none()
}

/// The form a `domain` or `domain_suffix` value is matched in: lower case,
/// no trailing dot. Refuses what no domain name can be, so a typo does not
/// become a rule that silently never matches.
pub fn normalize_domain(text: &str) -> Result<String, String> {
    let name = trim_name(text);
    match fault(name) {
        None => Ok(name.to_ascii_lowercase()),
        Some(Fault::Empty) => Err("the domain is empty".into()),
        Some(Fault::LeadingDot) => Err(format!(
            "`{text}` starts with a dot: write `{}`, which matches the domain and its subdomains",
            name.trim_start_matches('.')
        )),
        Some(Fault::TooLong) => Err(format!("`{text}` is longer than {MAX_NAME} characters")),
        Some(Fault::Holds(bad)) if bad.is_ascii() => Err(format!(
            "`{text}` contains `{bad}`, which a domain name cannot hold"
        )),
        Some(Fault::Holds(_)) => Err(format!(
            "`{text}` is not ASCII: write an internationalised name in its `xn--` form"
        )),
        Some(Fault::EmptyLabel) => Err(format!("`{text}` has an empty label")),
        Some(Fault::LongLabel(label)) => Err(format!(
            "the label `{label}` is longer than {MAX_LABEL} characters"
        )),
    }
}

/// The form a `domain_keyword` value is matched in: lower case. Dots are kept
/// (`google.` is a useful keyword); an empty keyword would match everything.
pub fn normalize_keyword(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("the keyword is empty".into());
    }
    if let Some(bad) = text.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(if bad.is_ascii() {
            format!("the keyword `{text}` contains {bad:?}, which a domain name cannot hold")
        } else {
            format!("the keyword `{text}` is not ASCII: write an internationalised name in its `xn--` form")
        });
    }
    Ok(text.to_ascii_lowercase())
}

/// A looked-up name without its trailing dot.
pub(super) fn trim_name(name: &str) -> &str {
    name.strip_suffix('.').unwrap_or(name)
}

/// Every domain matcher of every rule, indexed.
#[derive(Clone, Debug, Default)]
pub(super) struct DomainIndex {
    names: NameMap,
    keywords: KeywordSet,
}

impl DomainIndex {
    /// `domain` and `suffix` must be normalised; rules in ascending order.
    pub(super) fn add_exact(&mut self, domain: &str, rule: u32) {
        push_once(&mut self.names.insert(domain).exact, rule);
    }

    pub(super) fn add_suffix(&mut self, suffix: &str, rule: u32) {
        push_once(&mut self.names.insert(suffix).suffix, rule);
    }

    pub(super) fn add_keyword(&mut self, keyword: &str, rule: u32) {
        self.keywords.add(keyword, rule);
    }

    /// Builds the keyword automaton; called once, after every `add_*`.
    pub(super) fn finish(&mut self) -> Result<(), String> {
        self.keywords.finish()
    }

    /// Calls `visit` with the rule list of every matcher that matches `name`.
    pub(super) fn lookup(&self, name: &str, visit: &mut impl FnMut(&[u32])) {
        let name = trim_name(name);
        self.names.lookup(name, visit);
        self.keywords.lookup(name, visit);
    }
}

fn push_once(rules: &mut Vec<u32>, rule: u32) {
    if rules.last() != Some(&rule) {
        rules.push(rule);
    }
}

/// Every `domain` and `domain_suffix` name, and every shorter suffix of
/// one at a label boundary, in one hash map: a lookup tries the name's
/// suffixes from the shortest (`com`, `example.com`, `www.example.com`) and
/// stops at the first one absent, as no longer one can then be present. One
/// map probe a label, where a trie of labels would need several.
#[derive(Clone, Debug, Default)]
struct NameMap {
    names: HashMap<Box<str>, NameEntry, FxBuild>,
}

#[derive(Clone, Debug, Default)]
struct NameEntry {
    /// Rules with a `domain` equal to this name.
    exact: Vec<u32>,
    /// Rules with a `domain_suffix` equal to this name.
    suffix: Vec<u32>,
}

impl NameMap {
    fn insert(&mut self, name: &str) -> &mut NameEntry {
        let mut at = name.len();
        while let Some(dot) = name[..at].rfind('.') {
            self.names.entry(name[dot + 1..].into()).or_default();
            at = dot;
        }
        self.names.entry(name.into()).or_default()
    }

    fn lookup(&self, name: &str, visit: &mut impl FnMut(&[u32])) {
        // No rule's name is longer than MAX_NAME, so only the tail of a
        // longer name, from a label boundary, can match (as a suffix).
        let from = if name.len() <= MAX_NAME {
            0
        } else {
            let tail = name.len() - MAX_NAME;
            match name.as_bytes()[tail..].iter().position(|&b| b == b'.') {
                Some(dot) => tail + dot + 1,
                None => return,
            }
        };
        let mut buffer = [0u8; MAX_NAME];
        let folded = &mut buffer[..name.len() - from];
        folded.copy_from_slice(&name.as_bytes()[from..]);
        folded.make_ascii_lowercase();
        // ASCII folding keeps UTF-8 valid, and `from` is after an ASCII dot.
        let Ok(folded) = std::str::from_utf8(folded) else {
            return;
        };
        let mut at = folded.len();
        loop {
            let start = folded[..at].rfind('.').map_or(0, |dot| dot + 1);
            let Some(entry) = self.names.get(&folded[start..]) else {
                return;
            };
            if !entry.suffix.is_empty() {
                visit(&entry.suffix);
            }
            if start == 0 {
                if from == 0 && !entry.exact.is_empty() {
                    visit(&entry.exact);
                }
                return;
            }
            at = start - 1;
        }
    }
}

/// Keywords and the rules naming each; one automaton finds every keyword a
/// name contains in one pass.
#[derive(Clone, Debug, Default)]
struct KeywordSet {
    ids: HashMap<String, usize>,
    rules: Vec<Vec<u32>>,
    automaton: Option<AhoCorasick>,
}

impl KeywordSet {
    fn add(&mut self, keyword: &str, rule: u32) {
        let next = self.rules.len();
        let id = *self.ids.entry(keyword.to_owned()).or_insert(next);
        if id == next {
            self.rules.push(Vec::new());
        }
        push_once(&mut self.rules[id], rule);
    }

    fn finish(&mut self) -> Result<(), String> {
        if self.rules.is_empty() {
            return Ok(());
        }
        let mut patterns = vec![""; self.rules.len()];
        for (keyword, &id) in &self.ids {
            patterns[id] = keyword;
        }
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(patterns)
            .map_err(|err| format!("the domain keywords do not compile: {err}"))?;
        self.automaton = Some(automaton);
        Ok(())
    }

    fn lookup(&self, name: &str, visit: &mut impl FnMut(&[u32])) {
        if let Some(automaton) = &self.automaton {
            for found in automaton.find_overlapping_iter(name) {
                visit(&self.rules[found.pattern().as_usize()]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(exact: &[&str], suffix: &[&str], keyword: &[&str]) -> DomainIndex {
        let mut index = DomainIndex::default();
        let mut rule = 0;
        for domain in exact {
            index.add_exact(domain, rule);
            rule += 1;
        }
        for domain in suffix {
            index.add_suffix(domain, rule);
            rule += 1;
        }
        for keyword in keyword {
            index.add_keyword(keyword, rule);
            rule += 1;
        }
        index.finish().unwrap();
        index
    }

    fn hits(index: &DomainIndex, name: &str) -> Vec<u32> {
        let mut out = Vec::new();
        index.lookup(name, &mut |rules: &[u32]| out.extend_from_slice(rules));
        // A keyword found several times in a name is visited each time.
        out.sort_unstable();
        out.dedup();
        out
    }

    #[test]
    fn exact_matches_only_the_name_itself() {
        let index = index(&["example.com"], &[], &[]);
        assert_eq!(hits(&index, "example.com"), vec![0]);
        assert_eq!(hits(&index, "www.example.com"), Vec::<u32>::new());
        assert_eq!(hits(&index, "com"), Vec::<u32>::new());
    }

    #[test]
    fn suffix_matches_the_domain_and_its_subdomains() {
        let index = index(&[], &["example.com"], &[]);
        assert_eq!(hits(&index, "example.com"), vec![0]);
        assert_eq!(hits(&index, "a.b.example.com"), vec![0]);
        assert_eq!(hits(&index, "com"), Vec::<u32>::new());
    }

    #[test]
    fn suffix_does_not_match_a_longer_label() {
        let index = index(&[], &["example.com"], &[]);
        assert_eq!(hits(&index, "badexample.com"), Vec::<u32>::new());
        assert_eq!(hits(&index, "example.community"), Vec::<u32>::new());
    }

    #[test]
    fn keyword_matches_anywhere_in_the_name() {
        let index = index(&[], &[], &["goog", "le.c"]);
        assert_eq!(hits(&index, "www.google.com"), vec![0, 1]);
        assert_eq!(hits(&index, "gogle.net"), Vec::<u32>::new());
    }

    #[test]
    fn names_compare_case_insensitively_and_ignore_a_trailing_dot() {
        let index = index(&["example.com"], &["example.org"], &["shop"]);
        assert_eq!(hits(&index, "EXAMPLE.Com."), vec![0]);
        assert_eq!(hits(&index, "WWW.Example.ORG."), vec![1]);
        assert_eq!(hits(&index, "ESHOP.net"), vec![2]);
    }

    #[test]
    fn a_name_longer_than_any_domain_still_matches_a_suffix_and_a_keyword() {
        let index = index(&["example.com"], &["example.com"], &["a.a.a"]);
        let long = format!("{}.Example.com", "a.".repeat(200));
        assert_eq!(hits(&index, &long), vec![1, 2]);
        let long = format!("{}.example.com", "b".repeat(300));
        assert_eq!(
            hits(&index, &long),
            vec![1],
            "a label past the limit does not hide the suffix"
        );
    }

    #[test]
    fn a_name_that_is_only_an_unknown_suffix_matches_nothing() {
        let index = index(&["www.example.com"], &["a.example.com"], &[]);
        assert_eq!(hits(&index, "example.com"), Vec::<u32>::new());
        assert_eq!(hits(&index, "com"), Vec::<u32>::new());
        assert_eq!(hits(&index, "x.www.example.com"), Vec::<u32>::new());
        assert_eq!(hits(&index, "a..example.com"), Vec::<u32>::new());
    }

    #[test]
    fn normalising_lowercases_and_drops_the_trailing_dot() {
        assert_eq!(normalize_domain("Example.COM.").unwrap(), "example.com");
        assert_eq!(normalize_keyword("GooG").unwrap(), "goog");
    }

    #[test]
    fn normalising_refuses_what_no_domain_can_be() {
        assert_eq!(normalize_domain("").unwrap_err(), "the domain is empty");
        assert_eq!(
            normalize_domain(".example.com").unwrap_err(),
            "`.example.com` starts with a dot: write `example.com`, which matches the domain and its subdomains"
        );
        assert_eq!(
            normalize_domain("a..com").unwrap_err(),
            "`a..com` has an empty label"
        );
        assert_eq!(
            normalize_domain("exa mple.com").unwrap_err(),
            "`exa mple.com` contains ` `, which a domain name cannot hold"
        );
        assert_eq!(
            normalize_domain("bücher.de").unwrap_err(),
            "`bücher.de` is not ASCII: write an internationalised name in its `xn--` form"
        );
        assert!(normalize_domain(&format!("{}.com", "a".repeat(64))).is_err());
        assert_eq!(normalize_keyword("").unwrap_err(), "the keyword is empty");
    }
}
