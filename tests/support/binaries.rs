//! Where the binaries under test and the peers are.
//!
//! Ours are found next to the test executable: cargo puts test executables
//! in `target/<profile>/deps/` and binaries in `target/<profile>/`, and
//! `cargo test --workspace` builds the binaries of every package that has an
//! integration test (compiler/tests for `etc`, runtime/run/tests/binary.rs
//! for `etemenanki-run`) before it runs any test. `CARGO_BIN_EXE_*` would
//! name them only for tests of their own package, and a dependency on a
//! binary (an artifact dependency) is unstable. A missing one is a build
//! problem, so it fails the test; building it here with a nested cargo
//! would fight the outer one for the target directory.
//!
//! A missing peer is the machine's business: locally the test says so and
//! skips, under `CI=true` (where `.ci/run` installs the peers) it fails.

use std::io::Write;
use std::path::PathBuf;

/// `etc` or `etemenanki-run` from this target directory.
pub fn ours(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable sits in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing; build it first (cargo test --workspace does, or \
         cargo build -p etemenanki-compiler -p etemenanki-run)",
        path.display()
    );
    path
}

/// The peer `binary` if installed. Otherwise `None` after saying that
/// `test` skips, or a panic under CI.
pub fn peer(test: &str, binary: &str) -> Option<PathBuf> {
    if let Some(path) = find(binary) {
        return Some(path);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: {binary} is not installed, and CI must run every interop test");
    }
    // Straight to the process's stderr: the test harness captures
    // `eprintln!` of passing tests, and a skip must be seen.
    let _ = writeln!(std::io::stderr(), "skipping {test}: {binary} not installed");
    None
}

/// `binary` on `PATH`, or in the sbin directories a non-root `PATH` lacks
/// (Debian installs `danted` in `/usr/sbin`).
fn find(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
}
