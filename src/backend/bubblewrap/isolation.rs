//! The isolation part of the bwrap argv: namespaces, the workspace and
//! tmp binds, and the read-only system directories and `/etc` entries.

use std::path::Path;

use super::{BubblewrapOptions, SANDBOX_TMPDIR, SANDBOX_WORKDIR};

/// `/etc` entries bound read-only when they exist (the reference's list,
/// plus what dynamic linking, locales and time zones read).
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
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/os-release",
];

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
