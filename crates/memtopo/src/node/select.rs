//! The node's name and the names of per-GPU files: `{uuid}`, `{index}` and `{node}` in
//! `-o` paths.

use std::path::{Path, PathBuf};

/// The node's name: Slurm's (`SLURMD_NODENAME`, set in every task), else the host name.
pub fn node_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|n| !n.trim().is_empty())
        .or_else(|| crate::conditions::base_record().host)
        .unwrap_or_else(|| "localhost".into())
}

/// An output path with `{uuid}`, `{index}` and `{node}` replaced.
pub fn expand(path: &Path, uuid: &str, index: u32, node: &str) -> PathBuf {
    let text = path.to_string_lossy();
    PathBuf::from(
        text.replace("{uuid}", uuid)
            .replace("{index}", &index.to_string())
            .replace("{node}", node),
    )
}

/// An output path with `{node}` replaced (the GPU's names come later).
pub fn expand_node(path: &Path, node: &str) -> PathBuf {
    PathBuf::from(path.to_string_lossy().replace("{node}", node))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_expand() {
        let p = expand(
            Path::new("out/{node}/{uuid}-{index}.json"),
            "GPU-x",
            3,
            "n1",
        );
        assert_eq!(p, PathBuf::from("out/n1/GPU-x-3.json"));
        assert_eq!(
            expand_node(Path::new("res/{node}/"), "n1"),
            PathBuf::from("res/n1/")
        );
    }
}
