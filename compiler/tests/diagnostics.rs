//! One fixture per diagnostic code, each rendered without colour at a fixed
//! width and pinned by an insta snapshot under the top-level snapshots/.

use std::path::Path;

use etemenanki_compiler::render::{self, Style};
use etemenanki_compiler::{codes, compile, Source};

fn fixture(code: &str) -> Option<Source> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    ["toml", "et"].iter().find_map(|ext| {
        let name = format!("{code}.{ext}");
        let text = std::fs::read_to_string(dir.join(&name)).ok()?;
        // Relative to the fixture directory so that file references in
        // fixtures resolve, named without the machine's path in snapshots.
        Some(Source::new(dir.join(&name).display().to_string(), text))
    })
}

#[test]
fn every_code_has_a_fixture_that_reports_it_and_a_snapshot() {
    let mut missing = Vec::new();
    for code in codes::ALL {
        let Some(source) = fixture(code.code) else {
            missing.push(code.code);
            continue;
        };
        let diags = match compile(&source) {
            Ok(compiled) => compiled.warnings,
            Err(diags) => diags,
        };
        assert!(
            diags.iter().any(|d| d.code == code.code),
            "fixture {} does not report {}: {diags:#?}",
            source.path,
            code.code
        );
        let shown = Source::new(
            format!(
                "fixtures/{}",
                Path::new(&source.path)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
            ),
            source.text.clone(),
        );
        let rendered = render::human(&shown, &diags, Style::plain());
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots/diagnostics"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(code.code, rendered);
        });
    }
    assert!(missing.is_empty(), "codes without a fixture: {missing:?}");
}

#[test]
fn every_code_has_an_explanation() {
    for code in codes::ALL {
        assert!(
            code.explanation.len() > 40,
            "{} needs a real explanation",
            code.code
        );
        assert!(!code.title.ends_with('.'));
    }
}
