//! Every configuration in examples/ compiles, and each `.et` file compiles
//! to the same spec as the `.toml` file of the same name.

use std::path::{Path, PathBuf};

use etemenanki_compiler::{compile_file, Failure};
use etemenanki_ir::route::{RouteTable, Rule};
use etemenanki_ir::spec::Spec;

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples/ is readable")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("et" | "toml")))
        .collect();
    files.sort();
    files
}

fn spec(path: &Path) -> Spec {
    match compile_file(path) {
        Ok((_, compiled)) => {
            assert!(
                compiled.warnings.is_empty(),
                "{} has warnings: {:#?}",
                path.display(),
                compiled.warnings
            );
            compiled.spec
        }
        Err(Failure::Io(e)) => panic!("{e}"),
        Err(Failure::Invalid(_, diags)) => {
            panic!("{} does not compile: {diags:#?}", path.display())
        }
    }
}

/// The spec without what differs between the two files of a pair by
/// nature: the line each rule was written on.
fn without_lines(mut spec: Spec) -> Spec {
    let rules = spec
        .route
        .rules()
        .iter()
        .map(|rule| Rule {
            line: 0,
            ..rule.clone()
        })
        .collect();
    spec.route =
        RouteTable::new(rules, spec.route.default().to_owned()).expect("the rules compiled before");
    spec
}

#[test]
fn every_example_compiles_without_warnings() {
    let files = examples();
    assert!(
        files.len() >= 12,
        "expected the six pairs of examples, found {files:?}"
    );
    for path in files {
        spec(&path);
    }
}

#[test]
fn each_et_example_compiles_to_the_spec_of_its_toml_twin() {
    let files = examples();
    let ets: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "et"))
        .collect();
    for et in &ets {
        let toml = et.with_extension("toml");
        assert!(files.contains(&toml), "{} has no TOML twin", et.display());
        assert_eq!(
            without_lines(spec(et)),
            without_lines(spec(&toml)),
            "{} and {} differ",
            et.display(),
            toml.display()
        );
    }
    let tomls = files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .count();
    assert_eq!(ets.len(), tomls, "every example comes in both forms");
}
