//! Issue 14, point 9: SIGKILL of `wsbench exec` mid-command leaves no
//! process of the command behind (the command line carries a unique tag;
//! `/proc` is polled for it, bounded, no fixed sleep decides anything).

use std::process::Stdio;
use std::time::Duration;

use crate::support::cli::wsbench_cmd;
use crate::support::procs;

/// A command that runs until killed, its tag in its own command line and
/// in a child that left the process group (`setsid`).
fn long_command(tag: &str) -> String {
    // `$x`: the escapee's tag appears only once the shell expanded it,
    // never in the command line of wsbench or the outer shell.
    format!(
        "x=esc; setsid sh -c \"sleep 300; : {tag}-$x\" & exec sh -c 'while :; do sleep 1; done' {tag}-main"
    )
}

#[test]
fn sigkill_of_wsbench_exec_on_local_kills_the_command() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let tag = format!("wsbench-orphan-local-{}", std::process::id());
    let mut child = wsbench_cmd(home.path())
        .args(["exec", "--workdir"])
        .arg(work.path())
        .args(["--", "sh", "-c", &long_command(&tag)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The escapee has started (so the command around it has too).
    let t = Duration::from_secs(30);
    procs::wait_for_tag(&format!("{tag}-esc"), t, "local setsid child");
    child.kill().unwrap();
    child.wait().unwrap();
    procs::assert_gone(&tag, Duration::from_secs(10), "local exec after SIGKILL");
}
