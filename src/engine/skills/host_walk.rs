//! Walking a host skill folder for `skills add DIR` and seeding, under the
//! same link rule as archives ([`archive`](super::archive)): a link is
//! never followed out of the folder. A symlink whose target, resolved
//! against the folder, is a regular file inside it becomes a copy of that
//! file; an absolute link, one that climbs out with `..`, one that leads
//! out through another link, a link to a directory and a dangling link
//! refuse the whole copy with the link's path and target named (issue 14
//! point 2: dereferencing them copied host files into the workspace).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::archive::{parent_of, resolve_inside};
use super::invalid;
use crate::engine::error::WsResult;

/// Host directories nested deeper than this are refused when copying a
/// skill.
const MAX_HOST_DEPTH: usize = 64;

/// One entry of a host directory being copied.
pub(super) struct HostItem {
    /// Path relative to the folder, `/`-separated.
    pub rel: String,
    /// What to read: the entry itself, or for a link the file it names
    /// (canonical, inside the folder).
    pub abs: PathBuf,
    /// A directory (created, not read).
    pub is_dir: bool,
    /// Permission bits of what `abs` names.
    pub mode: u32,
}

/// What [`walk_host`] found.
#[derive(Default)]
pub(super) struct HostWalk {
    /// What to copy, parents before children, by name.
    pub items: Vec<HostItem>,
    /// Special files left out (FIFOs, sockets, devices): their relative
    /// path and kind, `"a/pipe (a FIFO)"`, for a warning naming each.
    pub skipped: Vec<String>,
}

/// Lists host folder `root` recursively (parents before children, by
/// name) under the link rule of this module. Special files (FIFOs,
/// sockets, devices) are not copied; they are listed in
/// [`HostWalk::skipped`] so the caller can warn about each.
///
/// Errors: [`WorkspaceError::Invalid`](crate::engine::WorkspaceError)
/// naming the refused link, an unreadable entry, or a tree nested deeper
/// than [`MAX_HOST_DEPTH`].
pub(super) fn walk_host(root: &Path) -> WsResult<HostWalk> {
    // The folder the user named may itself be reached through a link; the
    // rule is about what is inside it.
    let canon_root = std::fs::canonicalize(root)
        .map_err(|e| invalid(format!("cannot read {}: {e}", root.display())))?;
    let mut out = HostWalk::default();
    visit(root, &canon_root, "", 0, &mut out)?;
    Ok(out)
}

fn visit(
    dir: &Path,
    canon_root: &Path,
    rel: &str,
    depth: usize,
    out: &mut HostWalk,
) -> WsResult<()> {
    if depth > MAX_HOST_DEPTH {
        return Err(invalid(format!("{} is nested too deeply", dir.display())));
    }
    let read_err = |e: std::io::Error| invalid(format!("cannot read {}: {e}", dir.display()));
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .collect::<Result<_, _>>()
        .map_err(read_err)?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let abs = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let r = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let meta = std::fs::symlink_metadata(&abs)
            .map_err(|e| invalid(format!("cannot copy {}: {e}", abs.display())))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            out.items.push(HostItem {
                rel: r.clone(),
                abs: abs.clone(),
                is_dir: true,
                mode: meta.permissions().mode(),
            });
            visit(&abs, canon_root, &r, depth + 1, out)?;
        } else if kind.is_file() {
            out.items.push(HostItem {
                rel: r,
                abs,
                is_dir: false,
                mode: meta.permissions().mode(),
            });
        } else if kind.is_symlink() {
            out.items.push(link_item(&abs, canon_root, r)?);
        } else {
            use std::os::unix::fs::FileTypeExt;
            let what = if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else if kind.is_block_device() {
                "a block device"
            } else if kind.is_char_device() {
                "a character device"
            } else {
                "not a regular file"
            };
            out.skipped.push(format!("{r} ({what})"));
        }
    }
    Ok(())
}

/// `Ok` unless `root/rel` is a link that leads out of `root` (the same
/// rule and message as [`walk_host`]); run before a file of the folder is
/// read, so a linked `SKILL.md` is refused before its text is parsed (and
/// quoted in an error). A missing entry is `Ok`: the caller reports it.
///
/// Errors: [`WorkspaceError::Invalid`](crate::engine::WorkspaceError)
/// naming the link and where it leads.
pub(super) fn check_link(root: &Path, rel: &str) -> WsResult<()> {
    let abs = root.join(rel);
    match std::fs::symlink_metadata(&abs) {
        Ok(m) if m.file_type().is_symlink() => {
            let canon_root = std::fs::canonicalize(root)
                .map_err(|e| invalid(format!("cannot read {}: {e}", root.display())))?;
            link_item(&abs, &canon_root, rel.to_string()).map(|_| ())
        }
        _ => Ok(()),
    }
}

/// The copy a link at `abs` (relative path `rel`) stands for, or the
/// refusal.
fn link_item(abs: &Path, canon_root: &Path, rel: String) -> WsResult<HostItem> {
    let target = std::fs::read_link(abs)
        .map_err(|e| invalid(format!("cannot read the link {}: {e}", abs.display())))?;
    let shown = target.display().to_string();
    let refuse = |why: &str| {
        invalid(format!(
            "refused the skill folder: the link {rel:?} points {why} ({shown:?}); links are never followed out of a skill folder, copy the file in instead"
        ))
    };
    // The lexical check first, the archive's rule: absolute or `..` out.
    if resolve_inside(parent_of(&rel), &shown).is_none() {
        return Err(refuse("outside the skill folder"));
    }
    // Then where it really leads: a chain of links may still leave; name
    // the hop that does and where it leads, not just the first link.
    if let Some(exit) = first_exit(abs, canon_root, &rel) {
        return Err(invalid(format!(
            "refused the skill folder: the link {rel:?} leads outside the skill folder{exit}; links are never followed out of a skill folder, copy the file in instead"
        )));
    }
    let real = std::fs::canonicalize(abs).map_err(|_| refuse("at nothing"))?;
    if !real.starts_with(canon_root) {
        return Err(refuse("outside the skill folder"));
    }
    let meta = std::fs::metadata(&real).map_err(|_| refuse("at nothing"))?;
    if !meta.is_file() {
        return Err(refuse("at a directory or special file"));
    }
    Ok(HostItem {
        rel,
        abs: real,
        is_dir: false,
        mode: meta.permissions().mode(),
    })
}

/// Follows the chain of links from `abs` (named `rel` in the folder) one
/// hop at a time and describes the first hop that leaves `canon_root`:
/// `: "b" points to "/etc/passwd"` for `a -> b -> /etc/passwd`, with the
/// resolved place when it differs from the written target. `None` when
/// every hop stays inside, a hop cannot be followed (missing, unreadable:
/// the caller's checks report those), or after 40 hops (the kernel's own
/// limit on a chain).
fn first_exit(abs: &Path, canon_root: &Path, rel: &str) -> Option<String> {
    let mut cur = abs.to_path_buf();
    let mut name = rel.to_string();
    for _ in 0..40 {
        let target = std::fs::read_link(&cur).ok()?;
        let next = cur.parent()?.join(&target);
        // Where `next` really is: its directory resolved (it may pass
        // through linked directories), its own name kept (it may be the
        // next link of the chain).
        let real = match next.file_name() {
            Some(f) if f != ".." && f != "." => std::fs::canonicalize(next.parent()?).ok()?.join(f),
            _ => std::fs::canonicalize(&next).ok()?,
        };
        if !real.starts_with(canon_root) {
            let shown = target.display().to_string();
            let resolved = if Path::new(&shown) == real {
                String::new()
            } else {
                format!(", which is {}", real.display())
            };
            return Some(if name == rel {
                format!(": it points to {shown:?}{resolved}")
            } else {
                format!(" through the link {name:?}, which points to {shown:?}{resolved}")
            });
        }
        if !std::fs::symlink_metadata(&real)
            .ok()?
            .file_type()
            .is_symlink()
        {
            return None;
        }
        name = real
            .strip_prefix(canon_root)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| real.display().to_string());
        cur = real;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn folder() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("skill")).unwrap();
        std::fs::write(
            d.path().join("skill/SKILL.md"),
            "---\nname: s\ndescription: d\n---\n",
        )
        .unwrap();
        std::fs::write(d.path().join("secret.txt"), "host secret").unwrap();
        std::fs::create_dir(d.path().join("hostdir")).unwrap();
        std::fs::write(d.path().join("hostdir/key"), "host key").unwrap();
        d
    }

    fn refused(d: &tempfile::TempDir, link: &str) -> String {
        let e = walk_host(&d.path().join("skill")).err().expect("refused");
        let msg = e.to_string();
        assert!(msg.contains(link) && msg.contains("refused"), "{msg}");
        msg
    }

    #[test]
    fn links_out_of_the_folder_are_refused() {
        let d = folder();
        symlink(d.path().join("secret.txt"), d.path().join("skill/abs")).unwrap();
        refused(&d, "abs");

        let d = folder();
        symlink("../secret.txt", d.path().join("skill/up")).unwrap();
        refused(&d, "up");

        let d = folder();
        symlink("../hostdir", d.path().join("skill/dir")).unwrap();
        refused(&d, "dir");

        // Inside lexically, out through another link.
        let d = folder();
        std::fs::create_dir(d.path().join("skill/sub")).unwrap();
        symlink(d.path().join("hostdir"), d.path().join("skill/sub/out")).unwrap();
        symlink("sub/out/key", d.path().join("skill/chain")).unwrap();
        refused(&d, "chain");

        let d = folder();
        symlink("missing", d.path().join("skill/dangling")).unwrap();
        refused(&d, "dangling");

        // A link to a directory inside is refused too (as in an archive).
        let d = folder();
        std::fs::create_dir(d.path().join("skill/docs")).unwrap();
        symlink("docs", d.path().join("skill/alias")).unwrap();
        refused(&d, "alias");
    }

    #[test]
    fn a_skill_md_linked_out_is_refused_before_it_is_read() {
        let d = folder();
        let host = d.path().join("host.md");
        std::fs::write(&host, "---\nname: a/HOSTSECRET\ndescription: d\n---\n").unwrap();
        let skill = d.path().join("skill");
        let _ = std::fs::remove_file(skill.join("SKILL.md"));
        symlink(&host, skill.join("SKILL.md")).unwrap();
        let e = check_link(&skill, "SKILL.md").err().unwrap().to_string();
        assert!(
            e.contains("\"SKILL.md\"") && e.contains("outside the skill folder"),
            "{e}"
        );
        assert!(!e.contains("HOSTSECRET"), "{e}");
        // A plain file, a link inside and a missing entry pass.
        std::fs::remove_file(skill.join("SKILL.md")).unwrap();
        std::fs::write(skill.join("real.md"), "x").unwrap();
        assert!(check_link(&skill, "SKILL.md").is_ok());
        symlink("real.md", skill.join("SKILL.md")).unwrap();
        assert!(check_link(&skill, "SKILL.md").is_ok());
        assert!(check_link(&skill, "nope.md").is_ok());
    }

    #[test]
    fn a_chain_out_names_the_link_that_leaves_and_where_it_leads() {
        let d = folder();
        let secret = d.path().join("secret.txt");
        symlink("b", d.path().join("skill/a")).unwrap();
        symlink(&secret, d.path().join("skill/b")).unwrap();
        let e = walk_host(&d.path().join("skill"))
            .err()
            .unwrap()
            .to_string();
        let want = format!(
            "through the link \"b\", which points to {:?}",
            secret.display().to_string()
        );
        // `a` or `b` may be visited first; either way the leaving hop is `b`.
        assert!(
            e.contains(&want) || e.contains("link \"b\" points outside"),
            "{e}"
        );
        let d = folder();
        symlink("b", d.path().join("skill/a")).unwrap();
        symlink("../secret.txt", d.path().join("skill/b")).unwrap();
        std::fs::write(d.path().join("skill/c"), "x").unwrap();
        let a = d.path().join("skill/a");
        let e = link_item(
            &a,
            &std::fs::canonicalize(d.path().join("skill")).unwrap(),
            "a".into(),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("the link \"a\" leads outside the skill folder through the link \"b\", which points to \"../secret.txt\", which is "), "{e}");
        assert!(e.contains("secret.txt"), "{e}");
    }

    #[test]
    fn a_link_to_a_file_inside_becomes_a_copy_of_it() {
        let d = folder();
        std::fs::create_dir(d.path().join("skill/docs")).unwrap();
        std::fs::write(d.path().join("skill/docs/a.md"), "A").unwrap();
        symlink("docs/a.md", d.path().join("skill/alias.md")).unwrap();
        let items = walk_host(&d.path().join("skill")).unwrap().items;
        let alias = items.iter().find(|i| i.rel == "alias.md").unwrap();
        assert!(!alias.is_dir);
        assert_eq!(std::fs::read_to_string(&alias.abs).unwrap(), "A");
        assert!(!std::fs::symlink_metadata(&alias.abs).unwrap().is_symlink());
    }

    #[test]
    fn special_files_are_listed_as_skipped_by_name_and_kind() {
        let d = folder();
        let fifo = d.path().join("skill/pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        std::fs::write(d.path().join("skill/plain.txt"), "x").unwrap();
        let w = walk_host(&d.path().join("skill")).unwrap();
        assert_eq!(w.skipped, ["pipe (a FIFO)"]);
        assert!(w.items.iter().all(|i| i.rel != "pipe"));
        assert!(w.items.iter().any(|i| i.rel == "plain.txt"));
    }
}
