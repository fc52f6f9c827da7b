//! Shared by the end-to-end tests (tests/e2e) and the interop tests
//! (tests/interop): finding binaries, supervising processes, loopback
//! servers and minimal clients written from the RFCs, so that no Etemenanki
//! code sits on the client side of a check. Each test binary includes it
//! with `#[path]` and uses what it needs.

pub mod binaries;
pub mod certs;
pub mod client;
pub mod etemenanki;
pub mod process;
pub mod servers;

use std::time::Duration;

/// How long any single wait in a test may take before it fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The size of the bulk transfer each path carries once.
pub const BULK: usize = 4 * 1024 * 1024;
