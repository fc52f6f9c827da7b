//! Reading plan.bin: a regular file only, up to a bound, and never an open
//! that waits (see `etemenanki_ir::file::read_regular`), because the control
//! loop reads the plan path again every second.

use std::path::Path;

use etemenanki_ir::encode::{decode, Plan};
use etemenanki_ir::file::{read_regular, PLAN_LIMIT};

/// The bytes of the plan file.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    read_regular(path, PLAN_LIMIT)
}

/// Reads and decodes a plan; the error is one line that says what was found
/// and what is needed.
pub fn load(path: &Path) -> Result<Plan, String> {
    let bytes = read(path).map_err(|e| format!("cannot read plan {}: {e}", path.display()))?;
    decode(&bytes).map_err(|e| format!("cannot load plan {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_fifo_at_the_plan_path_is_refused_without_waiting_for_a_writer() {
        let dir = std::env::temp_dir().join(format!("plan-file-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("plan.bin");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo runs");
        // On a thread, so that a read that blocks fails the test instead of
        // hanging it.
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(load(&fifo));
        });
        let loaded = result
            .recv_timeout(Duration::from_secs(5))
            .expect("reading a FIFO returns at once");
        let message = loaded.unwrap_err();
        assert!(
            message.ends_with("plan.bin: a FIFO is not a regular file"),
            "{message}"
        );
    }
}
