//! The isolation part of the bwrap argv: namespaces, the workspace and
//! tmp binds, and the read-only system directories and `/etc` entries.

use std::path::Path;

use super::{BubblewrapOptions, SANDBOX_TMPDIR, SANDBOX_WORKDIR};

/// `/etc` entries bound read-only when they exist: the reference's list
/// (docs/contract.md §7.2), then two more, each with its reason. Every
/// bind is a mount in each command's new namespace, so the list is kept
/// short (issue 18); `ld.so.conf`, `ld.so.conf.d` (read by `ldconfig`
/// only, which cannot write the read-only cache here anyway) and
/// `os-release` were dropped.
const ETC_BINDS: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ca-certificates",
    // The loader finds libraries outside its built-in path (`/usr/local/lib`,
    // multiarch extras) only through the cache.
    "/etc/ld.so.cache",
    // `date`, logs and timestamps in the sandbox use the host's zone.
    "/etc/localtime",
];

/// The host name inside every bubblewrap sandbox.
pub(super) const SANDBOX_HOSTNAME: &str = "wsbench-bwrap";

/// Top-level system dirs: bound read-only, or recreated as the same
/// symlink on merged-/usr systems.
const SYSTEM_DIRS: &[&str] = &["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];

/// The isolation part of the bwrap argv (everything before `--clearenv`).
pub(super) fn isolation_args(opts: &BubblewrapOptions, workdir: &Path, tmp: &Path) -> Vec<String> {
    let mut a: Vec<String> = ["--die-with-parent", "--new-session", "--unshare-all"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if opts.share_net {
        a.push("--share-net".into());
    }
    // The UTS namespace of `--unshare-all` starts as a copy of the host's
    // name, so `hostname` and a shell prompt inside would name the host
    // (issue 17's trial): a fixed name says where the shell is and tells
    // nothing of the machine. Docker's container id plays the same part.
    a.extend([String::from("--hostname"), String::from(SANDBOX_HOSTNAME)]);
    let s = |p: &Path| p.display().to_string();
    a.extend(
        [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--bind",
            &s(workdir),
            SANDBOX_WORKDIR,
            "--bind",
            &s(tmp),
            SANDBOX_TMPDIR,
            "--tmpfs",
            "/run",
            "--dir",
            "/var",
            "--tmpfs",
            "/var/tmp",
            "--ro-bind",
            "/usr",
            "/usr",
            "--dir",
            "/etc",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    for p in ETC_BINDS {
        if Path::new(p).exists() {
            a.extend(["--ro-bind".to_string(), p.to_string(), p.to_string()]);
        }
    }
    for d in SYSTEM_DIRS {
        match std::fs::read_link(d) {
            Ok(target) => a.extend(["--symlink".to_string(), s(&target), d.to_string()]),
            Err(_) if Path::new(d).is_dir() => {
                a.extend(["--ro-bind".to_string(), d.to_string(), d.to_string()])
            }
            Err(_) => {}
        }
    }
    for p in &opts.ro_binds {
        if p.is_absolute() && p.exists() && !p.starts_with("/usr") {
            a.extend(["--ro-bind".to_string(), s(p), s(p)]);
        }
    }
    a
}
