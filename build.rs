//! Build script: stamps the commit the binary was built from into
//! `--version` (`WSBENCH_COMMIT`, `WSBENCH_COMMIT_DATE`).
//!
//! Why the commit's date and not the build's: the build date changes on
//! every build, so the crate (and everything that links it) would be
//! rebuilt each time and two builds of one commit would differ; the
//! commit date names the same moment for everyone. Limits: uncommitted
//! changes are not marked (watching the whole tree would re-run this on
//! every edit); a build without git or outside a clone (a crate tarball)
//! says `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn main() {
    // Re-run when HEAD moves (a commit, a checkout), not on every edit.
    if let Some(p) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={p}");
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git(&["rev-parse", "--git-path", &reference])
    {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let date = git(&["log", "-1", "--format=%cs"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=WSBENCH_COMMIT={commit}");
    println!("cargo:rustc-env=WSBENCH_COMMIT_DATE={date}");
}
