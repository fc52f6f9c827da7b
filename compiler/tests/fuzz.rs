//! Mutated example configurations through both front ends and the
//! renderer: bounded (a fixed number of rounds), seeded (the same inputs on
//! every run), on stable Rust.
//!
//! Every input comes back without a panic; one that does not compile comes
//! back with at least one error; every span of every diagnostic lies inside
//! the file, on character boundaries; and each is rendered for a human, as
//! JSON and as compact lines without a panic. This replaces an earlier test
//! that fed mutated TOML to the compiler and checked only for panics.

use std::path::{Path, PathBuf};

use etemenanki_compiler::render::{self, Style};
use etemenanki_compiler::{compile_bytes, Diagnostic, Failure, Source};

const ROUNDS: usize = 3_000;

/// xorshift64: a fixed seed gives the same inputs every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Pieces of both languages, and the inputs that broke `etc` before.
const PIECES: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"=",
    b",",
    b"->",
    b"\n",
    b"#",
    b" and ",
    b"[[outbound]]\n",
    b"[[route.rule]]\noutbound = \"x\"\n",
    b"outbound x socks {}\n",
    b"route { cidr 10.0.0.0/33 -> x }\n",
    b"cidr = [\"bad\"]\n",
    b"network = \"tcpp\"\n",
    b"geoip = [\"nowhere\"]\n",
    b"password = hunter2x\n",
    b"password = file(\"/dev/zero\")\n",
    b"password = env(\"ETC_FUZZ_UNSET\")\n",
    b"protocol = \"trojn\"\n",
    b"port = 99999\n",
    b"\xff\xfe",
    b"\r",
    b"\x1b[31m",
    "é中\u{feff}".as_bytes(),
    b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
];

fn examples() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("et" | "toml")))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn mutate(bytes: &mut Vec<u8>, other: &[u8], random: &mut Random) {
    let at = random.below(bytes.len() + 1);
    match random.below(7) {
        0 if at < bytes.len() => bytes[at] = PIECES[random.below(PIECES.len())][0],
        1 => {
            let end = (at + 1 + random.below(16)).min(bytes.len());
            bytes.drain(at.min(end)..end);
        }
        2 => {
            let end = (at + 1 + random.below(64)).min(bytes.len());
            let copy = bytes[at.min(end)..end].to_vec();
            let to = random.below(bytes.len() + 1);
            bytes.splice(to..to, copy);
        }
        3 => {
            let from = random.below(other.len() + 1);
            let end = (from + random.below(200)).min(other.len());
            bytes.splice(at..at, other[from..end].iter().copied());
        }
        4 => bytes.truncate(at),
        // Once in a while, a line far longer than a terminal.
        5 if random.below(20) == 0 => {
            bytes.splice(at..at, vec![b'a'; 70_000]);
        }
        _ => {
            let piece = PIECES[random.below(PIECES.len())];
            bytes.splice(at..at, piece.iter().copied());
        }
    }
}

fn check_spans(source: &Source, diags: &[Diagnostic], what: &str) {
    let text = &source.text;
    for d in diags {
        let spans = std::iter::once(&d.span).chain(d.labels.iter().map(|l| &l.span));
        for span in spans {
            assert!(
                span.start <= span.end && span.end <= text.len(),
                "{what}: span {span:?} outside a file of {} bytes: {d:?}",
                text.len()
            );
            assert!(
                text.is_char_boundary(span.start) && text.is_char_boundary(span.end),
                "{what}: span {span:?} splits a character: {d:?}"
            );
        }
        let (line, _) = source.line_col(d.span.start);
        assert!(line <= source.line_count(), "{what}: line {line}: {d:?}");
        assert!(
            !d.message.is_empty(),
            "{what}: {d:?} at {:?}",
            &text[d.span.start.saturating_sub(40).min(d.span.start)..d.span.end]
        );
    }
}

#[test]
fn mutated_examples_never_panic_and_every_invalid_one_gets_an_error_inside_the_file() {
    let examples = examples();
    let mut random = Random(0x2545_f491_4f6c_dd1d);
    let mut invalid = 0;
    for round in 0..ROUNDS {
        let (path, original) = &examples[random.below(examples.len())];
        let (_, other) = &examples[random.below(examples.len())];
        let mut bytes = original.clone();
        for _ in 0..1 + random.below(6) {
            mutate(&mut bytes, other, &mut random);
        }
        // Both front ends, in the examples' directory so file("...") resolves.
        for ext in ["toml", "et"] {
            let name = path.with_extension(ext).display().to_string();
            let what = format!("round {round}, {name}");
            let (source, diags) = match compile_bytes(name, bytes.clone()) {
                Ok((source, compiled)) => (source, compiled.warnings),
                Err(Failure::Invalid(source, diags)) => {
                    assert!(
                        diags.iter().any(Diagnostic::is_error),
                        "{what}: refused without an error: {diags:?}"
                    );
                    invalid += 1;
                    (source, diags)
                }
                Err(Failure::Io(e)) => panic!("{what}: {e}"),
            };
            check_spans(&source, &diags, &what);
            render::human(&source, &diags, Style::plain());
            render::json(&[(&source, &diags[..])]);
            render::compact(&source, &diags);
        }
    }
    // The mutations are not all harmless, nor all fatal.
    assert!(
        invalid > ROUNDS / 2 && invalid < 2 * ROUNDS,
        "{invalid} invalid"
    );
}
