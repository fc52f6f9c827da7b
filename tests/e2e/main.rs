//! End to end: the real `etemenanki-run` (and `etc`, where a test needs the
//! compiler) on loopback, driven by the blocking clients of tests/support.
//! Each module is one area of behaviour; the plans are written from specs
//! (plan.rs) and served by [`runtime::Runtime`].

mod admission;
mod balancer;
mod chain;
mod etc;
mod plan;
mod reload;
mod route_bypass;
mod route_context;
mod runtime;
mod serve;
mod sniff;
// Shared with tests/interop, which uses parts these tests do not.
#[allow(dead_code)]
#[path = "../support/mod.rs"]
mod support;
mod udp_route;
