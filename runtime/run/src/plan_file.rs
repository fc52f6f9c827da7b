//! Reading plan.bin.

use std::path::Path;

use etemenanki_ir::encode::{decode, Plan};

/// Reads and decodes a plan; the error is one line that says what was found
/// and what is needed.
pub fn load(path: &Path) -> Result<Plan, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read plan {}: {e}", path.display()))?;
    decode(&bytes).map_err(|e| format!("cannot load plan {}: {e}", path.display()))
}
