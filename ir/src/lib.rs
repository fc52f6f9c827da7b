//! etemenanki-ir: the plan's types, its encoding, the route table and the
//! planner. Shared by the compiler (which writes plans) and the runtime (which
//! executes them).

pub mod base64;
pub mod encode;
pub mod file;
pub mod plan;
pub mod route;
pub mod spec;
pub mod state;
#[cfg(test)]
mod testing;

use std::time::Duration;

/// Formats a duration the way the language writes it: `30s`, `250ms`, `5m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms.is_multiple_of(3_600_000) && ms > 0 {
        format!("{}h", ms / 3_600_000)
    } else if ms.is_multiple_of(60_000) && ms > 0 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}
