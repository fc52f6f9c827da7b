//! Reading and writing the files both binaries handle: configurations,
//! secrets, plan.bin and the runtime's state file.
//!
//! - [`read_regular`] reads a regular file only, up to a bound. A FIFO at
//!   the path would block the reader until a writer came, `/dev/zero` would
//!   never end: both are refused at once, without blocking (the open is
//!   non-blocking and the type is checked on the opened file, so nothing can
//!   be swapped in between).
//! - [`write_private`] replaces a file that holds secrets (a plan, a state
//!   file): through a fresh temporary file with an unpredictable name,
//!   created exclusively and mode 0600 in the target's directory, then
//!   renamed over the target. A file or symlink planted at a predictable name
//!   can neither widen the mode nor redirect the bytes, and a reader of the
//!   target never sees half a file.

use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::OFlags;

/// The largest plan or state file read: ample for a table of a million
/// rules, and a bound on what a wrong path can make a reader allocate.
pub const PLAN_LIMIT: u64 = 1 << 30;

/// Reads a regular file of at most `limit` bytes.
///
/// Anything else is an error of kind `InvalidInput` that says what was
/// found (`a FIFO is not a regular file`), and a longer file one of kind
/// `InvalidData` (`larger than the limit of N bytes`).
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flag(OFlags::NONBLOCK))
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", describe(kind)),
        ));
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than the limit of {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// An open(2) flag as `OpenOptionsExt::custom_flags` takes it.
fn flag(flag: OFlags) -> i32 {
    flag.bits() as i32
}

fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "this file"
    }
}

/// How many fresh names [`write_private`] tries before it gives up: a name
/// is taken only by a file planted or left there, so more than one clash is
/// already unlikely.
const ATTEMPTS: usize = 8;

/// Replaces `path` with `bytes`, readable by its owner only; see the module
/// documentation.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut attempt = 0;
    let (tmp, mut file) = loop {
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", unpredictable()));
        match create_exclusive(&tmp) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt + 1 < ATTEMPTS => {
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates a new file, mode 0600; fails if anything, a symlink included, is
/// at the path already.
fn create_exclusive(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(flag(OFlags::NOFOLLOW))
        .open(path)
}

/// 64 bits no other user can predict: SipHash keyed by std's `RandomState`,
/// whose keys come from the operating system's random source, over the time
/// and the process id (so two processes started together still differ).
fn unpredictable() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(now);
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::PathBuf;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ir-file-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_private_file_replaces_a_planted_world_readable_one_with_mode_0600() {
        let dir = dir("planted");
        let target = dir.join("plan.bin");
        std::fs::write(&target, b"old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(mode(&target), 0o600);
    }

    #[test]
    fn a_symlink_at_the_target_is_replaced_and_its_destination_left_alone() {
        let dir = dir("symlink");
        let elsewhere = dir.join("elsewhere");
        std::fs::write(&elsewhere, b"untouched").unwrap();
        let target = dir.join("plan.bin");
        std::os::unix::fs::symlink(&elsewhere, &target).unwrap();
        write_private(&target, b"secret").unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"untouched");
        assert!(!std::fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        assert_eq!(mode(&target), 0o600);
    }

    #[test]
    fn a_private_write_leaves_no_temporary_file_and_never_reuses_a_name() {
        let dir = dir("names");
        let target = dir.join("state");
        write_private(&target, b"one").unwrap();
        write_private(&target, b"two").unwrap();
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state")]);
        assert_ne!(unpredictable(), unpredictable());
    }

    #[test]
    fn a_temporary_name_taken_by_a_symlink_is_never_followed() {
        let dir = dir("taken");
        let elsewhere = dir.join("elsewhere");
        std::fs::write(&elsewhere, b"untouched").unwrap();
        let taken = dir.join(".plan.bin.tmp");
        std::os::unix::fs::symlink(&elsewhere, &taken).unwrap();
        let err = create_exclusive(&taken).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"untouched");
    }

    #[test]
    fn a_symlink_planted_at_a_name_derived_from_the_pid_is_never_followed() {
        // Where `etc build` used to open its temporary file, with O_CREAT and
        // without O_EXCL: anyone could plant a link there beforehand.
        let dir = dir("pid-name");
        let elsewhere = dir.join("elsewhere");
        std::fs::write(&elsewhere, b"untouched").unwrap();
        let planted = dir.join(format!(".plan.bin.tmp{}", std::process::id()));
        std::os::unix::fs::symlink(&elsewhere, &planted).unwrap();
        let target = dir.join("plan.bin");
        write_private(&target, b"secret").unwrap();
        assert_eq!(std::fs::read(&elsewhere).unwrap(), b"untouched");
        assert_eq!(std::fs::read(&target).unwrap(), b"secret");
        assert!(std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn a_fifo_is_refused_at_once_without_waiting_for_a_writer() {
        let dir = dir("fifo");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo runs");
        let err = read_regular(&fifo, 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "a FIFO is not a regular file");
    }

    #[test]
    fn a_device_and_a_directory_are_refused_and_a_long_file_is_bounded() {
        let err = read_regular(Path::new("/dev/zero"), 1024).unwrap_err();
        assert_eq!(err.to_string(), "a character device is not a regular file");
        let dir = dir("bounded");
        let err = read_regular(&dir, 1024).unwrap_err();
        assert_eq!(err.to_string(), "a directory is not a regular file");
        let file = dir.join("big");
        std::fs::write(&file, [0u8; 11]).unwrap();
        assert_eq!(read_regular(&file, 11).unwrap().len(), 11);
        let err = read_regular(&file, 10).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(err.to_string(), "larger than the limit of 10 bytes");
    }
}
