//! The `.et` front end's own diagnostics, rendered as `etc check` shows
//! them and pinned by insta snapshots under snapshots/diagnostics/et/. The
//! TOML fixtures of the same codes are in tests/diagnostics.rs.

use std::path::Path;

use etemenanki_compiler::render::{self, Style};
use etemenanki_compiler::{compile, Source};

#[test]
fn each_et_fixture_reports_its_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/et");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the .et fixtures are readable")
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".et"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 6,
        "expected the .et fixtures, found {names:?}"
    );
    for name in names {
        let code = name.trim_end_matches(".et");
        let text = std::fs::read_to_string(dir.join(&name)).expect("a fixture is readable");
        let source = Source::new(format!("fixtures/et/{name}"), text);
        let diags = match compile(&source) {
            Ok(compiled) => compiled.warnings,
            Err(diags) => diags,
        };
        assert!(
            diags.iter().any(|d| d.code == code),
            "{name} does not report {code}: {diags:#?}"
        );
        let rendered = render::human(&source, &diags, Style::plain());
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/../snapshots/diagnostics/et"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(code, rendered);
        });
    }
}
