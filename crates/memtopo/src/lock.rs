//! One memtopo per GPU: an advisory lock on a file named after the GPU's UUID.
//!
//! The lock is `flock`-style (the `fs4` crate; std's `File::try_lock` would need Rust 1.89,
//! above the workspace's MSRV): the kernel releases it when the holder exits, however it
//! exits, so a crashed run never leaves a stale lock. The key is
//! the UUID, not the index, which `CUDA_VISIBLE_DEVICES` renumbers: two shells that see the
//! same GPU as device 0 and device 3 still exclude each other.
//!
//! The files live in `$MEMTOPO_LOCK_DIR`, else `/tmp/memtopo-locks`: one directory for
//! every user of the machine (created sticky and world-writable, as `/tmp` is, and each
//! file world-writable), so that two users cannot measure one GPU at once either. The
//! holder writes its pid and command line into the file, so the waiting one can say who
//! holds it.

use std::{
    fs::{self, File, OpenOptions},
    io::{Read, Seek, Write},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

/// A held lock; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct GpuLock {
    _file: File,
    path: PathBuf,
}

impl GpuLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Why no lock was taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process held it for the whole wait; the text says who.
    Busy(String),
    /// The lock file could not be made or opened (the run goes on, unlocked).
    Unavailable(String),
}

/// The lock directory: `$MEMTOPO_LOCK_DIR`, else `/tmp/memtopo-locks`.
pub fn lock_dir() -> PathBuf {
    std::env::var_os("MEMTOPO_LOCK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("memtopo-locks"))
}

/// A file name from `key`: its letters, digits, `-` and `.`, the rest replaced.
fn file_name(key: &str) -> String {
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.lock")
}

fn open(dir: &Path, key: &str) -> Result<(File, PathBuf), String> {
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // Sticky and writable by all, like /tmp: everyone may add a lock file, nobody may
        // remove another's.
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o1777));
    }
    let path = dir.join(file_name(key));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .or_else(|_| OpenOptions::new().read(true).open(&path))
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o666));
    Ok((file, path))
}

/// Who holds the lock, from what the holder wrote into the file.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.read_to_string(&mut text);
    let text = text.trim();
    if text.is_empty() {
        "another process".to_string()
    } else {
        text.to_string()
    }
}

/// Takes the lock of `key` in `dir`, waiting up to `wait`; `on_wait` is called once, with
/// the holder, when the lock is taken by another process.
pub fn acquire(
    dir: &Path,
    key: &str,
    wait: Duration,
    mut on_wait: impl FnMut(&str),
) -> Result<GpuLock, LockError> {
    let (mut file, path) = open(dir, key).map_err(LockError::Unavailable)?;
    let start = Instant::now();
    let mut announced = false;
    loop {
        // Spelled out: on Rust 1.89+ `file.try_lock()` would be std's inherent method.
        match fs4::FileExt::try_lock(&file) {
            Ok(()) => break,
            Err(fs4::TryLockError::WouldBlock) => {
                let who = holder(&mut file);
                if !announced {
                    on_wait(&who);
                    announced = true;
                }
                if start.elapsed() >= wait {
                    return Err(LockError::Busy(who));
                }
                thread::sleep(Duration::from_millis(100).min(wait.saturating_sub(start.elapsed())));
            }
            Err(fs4::TryLockError::Error(e)) => {
                return Err(LockError::Unavailable(format!(
                    "cannot lock {}: {e}",
                    path.display()
                )))
            }
        }
    }
    // Say who holds it (best effort: a read-only file still locks).
    let me = format!(
        "memtopo pid {} ({})",
        std::process::id(),
        std::env::args().collect::<Vec<_>>().join(" ")
    );
    if file.set_len(0).is_ok() {
        let _ = file.rewind();
        let _ = file.write_all(me.as_bytes());
        let _ = file.flush();
    }
    Ok(GpuLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("memtopo-lock-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn names_are_safe_file_names() {
        assert_eq!(file_name("GPU-8d3e/../x y"), "GPU-8d3e_.._x_y.lock");
    }

    #[test]
    fn a_second_lock_waits_then_reports_the_holder() {
        let dir = scratch("second");
        let first = acquire(&dir, "GPU-1", Duration::ZERO, |_| {}).unwrap();
        let mut told = Vec::new();
        let started = Instant::now();
        let second = acquire(&dir, "GPU-1", Duration::from_millis(300), |who| {
            told.push(who.to_string())
        });
        assert!(started.elapsed() >= Duration::from_millis(300));
        match second {
            Err(LockError::Busy(who)) => {
                assert!(
                    who.contains(&format!("pid {}", std::process::id())),
                    "{who}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(told.len(), 1, "one message while waiting");
        // Another GPU is not blocked.
        assert!(acquire(&dir, "GPU-2", Duration::ZERO, |_| {}).is_ok());
        drop(first);
        assert!(acquire(&dir, "GPU-1", Duration::ZERO, |_| {}).is_ok());
        fs::remove_dir_all(dir).unwrap();
    }
}
