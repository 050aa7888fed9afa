//! `--workdir`: an exact local directory opened as a workspace, bypassing
//! profiles. Checked before it is opened; named by a stable id.

use std::path::Path;

/// The workspace id of a `--workdir` directory: the first 32 hex digits
/// of the SHA-256 of its canonical path — the shape of a minted id
/// (`uuid4().hex`, docs/contract.md §1), the same on every launch for the same
/// directory however it is spelt (`dir`, `dir/.`, a symlink), different
/// for different directories. Nothing on disk is keyed by it (sessions
/// and journals live in the directory), so earlier launches' data is
/// found whatever id they had.
pub(crate) fn workdir_workspace_id(dir: &Path) -> String {
    use sha2::Digest as _;
    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    hex::encode(digest)[..32].to_string()
}

/// Checks a `--workdir` before it is opened: an existing path must be a
/// directory; a missing one is an error unless `create` (`--create-workdir`)
/// asks for it, and then only the last level is made (a typo in a parent
/// must not silently create a tree of directories).
pub(crate) fn check_workdir(dir: &Path, create: bool) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => anyhow::bail!("--workdir {} is not a directory", dir.display()),
        Err(_) if !create => anyhow::bail!(
            "--workdir {} does not exist (add --create-workdir to make it)",
            dir.display()
        ),
        Err(_) => {
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
            match parent {
                Some(p) if !p.is_dir() => anyhow::bail!(
                    "--workdir {}: the parent directory {} does not exist (create it first; only the last level is made)",
                    dir.display(),
                    p.display()
                ),
                _ => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_keeps_its_workspace_id_across_launches() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let id = workdir_workspace_id(a.path());
        assert_eq!(id.len(), 32);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(workdir_workspace_id(a.path()), id);
        assert_eq!(workdir_workspace_id(&a.path().join(".")), id);
        let link = b.path().join("link");
        std::os::unix::fs::symlink(a.path(), &link).unwrap();
        assert_eq!(workdir_workspace_id(&link), id);
        assert_ne!(workdir_workspace_id(b.path()), id);
    }

    #[test]
    fn a_missing_workdir_is_made_only_when_asked() {
        let t = tempfile::tempdir().unwrap();
        let missing = t.path().join("typo");
        let e = check_workdir(&missing, false).unwrap_err().to_string();
        assert!(
            e.contains("does not exist") && e.contains("--create-workdir"),
            "{e}"
        );
        assert!(check_workdir(&missing, true).is_ok());
        assert!(check_workdir(&t.path().join("a/b"), true).is_err());
        assert!(check_workdir(t.path(), false).is_ok());
    }
}
