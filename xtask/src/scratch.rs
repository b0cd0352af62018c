//! Scratch directories for xtask's tests: a fresh directory under the target directory,
//! removed when dropped.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// A scratch directory, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh, empty directory named after `name` and this process.
    pub fn new(name: &str) -> Scratch {
        let dir = crate::target_dir(&crate::workspace_root())
            .join("xtask-tests")
            .join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes `text` to `path` (relative to the directory), making its parents.
    pub fn write(&self, path: &str, text: &str) {
        self.write_bytes(path, text.as_bytes());
    }

    /// Writes `bytes` to `path` (relative to the directory), making its parents.
    pub fn write_bytes(&self, path: &str, bytes: &[u8]) {
        let file = self.0.join(path);
        fs::create_dir_all(file.parent().expect("has a parent")).expect("directories");
        fs::write(&file, bytes).expect("write");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
