//! cargo builds a package's binaries for `cargo test` only when the package
//! has an integration test. This one makes `cargo test --workspace` build
//! `etemenanki-run`, which the end-to-end and interop tests of the tests
//! crate (tests/) spawn from the same target directory.

#[test]
fn cargo_test_builds_the_runtime_binary() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_etemenanki-run"));
    assert!(binary.is_file(), "{} is missing", binary.display());
}
