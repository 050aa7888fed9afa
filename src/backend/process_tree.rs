//! Finding and killing a command's whole process tree on Linux.
//!
//! A command runs as the leader of its own process group (its pgid is its
//! pid) and with a unique marker in its environment. On timeout we
//! kill the group, every descendant found by walking parent links, and every
//! process that still carries the marker — which catches descendants that
//! called `setsid()` and were re-parented away (the same cookie technique
//! Jenkins uses for build processes). Zombies are ignored: they are dead.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::backend::shell::marker::MARKER_VAR;

#[derive(Debug, Clone, Copy)]
struct ProcStat {
    ppid: i32,
    pgid: i32,
    sid: i32,
    zombie: bool,
}

fn read_stat(pid: i32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let mut it = rest.split_ascii_whitespace();
    let state = it.next()?;
    let ppid = it.next()?.parse().ok()?;
    let pgid = it.next()?.parse().ok()?;
    let sid = it.next()?.parse().ok()?;
    Some(ProcStat {
        ppid,
        pgid,
        sid,
        zombie: state == "Z" || state == "X",
    })
}

fn has_marker(pid: i32, needle: &[u8]) -> bool {
    match fs::read(format!("/proc/{pid}/environ")) {
        Ok(env) => env.split(|b| *b == 0).any(|kv| kv == needle),
        Err(_) => false,
    }
}

fn all_pids() -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Live (non-zombie) processes that belong to the tree rooted at `root`:
/// its group and session, its descendants, and any process whose
/// environment holds `MARKER_VAR=marker`.
pub fn members(root: i32, marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let needle = format!("{MARKER_VAR}={marker}").into_bytes();
    let mut stats = HashMap::new();
    for pid in all_pids() {
        if let Some(st) = read_stat(pid) {
            stats.insert(pid, st);
        }
    }
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (pid, st) in &stats {
        children.entry(st.ppid).or_default().push(*pid);
    }
    let mut found: HashSet<i32> = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        if found.insert(p)
            && let Some(kids) = children.get(&p)
        {
            stack.extend(kids);
        }
    }
    for (pid, st) in &stats {
        if st.pgid == root || st.sid == root || has_marker(*pid, &needle) {
            found.insert(*pid);
        }
    }
    found
        .into_iter()
        .filter(|p| *p != me && *p > 1)
        .filter(|p| stats.get(p).is_some_and(|st| !st.zombie))
        .collect()
}

fn signal_all(pids: &[i32], sig: Signal) {
    for pid in pids {
        let _ = kill(Pid::from_raw(*pid), sig);
    }
}

fn alive(pid: i32) -> bool {
    read_stat(pid).is_some_and(|st| !st.zombie)
}

/// Kills the tree rooted at `root`: freezes it (SIGSTOP) and collects it
/// until it stops growing, then SIGTERM (and SIGCONT, so the stopped see
/// it), up to `grace` for it to exit, then SIGKILL until nothing is left
/// (re-scanning, since processes may fork while we work). Blocking; call
/// from `spawn_blocking`.
///
/// Why freeze and collect first (issue 14): orphans of a double fork are
/// adopted by the root (see the local backend's `subreaper`) and found
/// only by their parent link; a SIGTERM that killed the root first would
/// hand them to PID 1 before the walk looked. The collected set is kept
/// across the phases, so a member whose parent died is still killed.
/// Limit: a pid of the set that died and was reused within the kill (at
/// most `grace` plus about a second) would be signalled too.
pub fn kill_tree(root: i32, marker: &str, grace: Duration) {
    let group = Pid::from_raw(-root);
    let _ = kill(group, Signal::SIGSTOP);
    let mut set: HashSet<i32> = HashSet::new();
    for _ in 0..16 {
        let new: Vec<i32> = members(root, marker)
            .into_iter()
            .filter(|p| set.insert(*p))
            .collect();
        if new.is_empty() {
            break;
        }
        signal_all(&new, Signal::SIGSTOP);
    }
    let first: Vec<i32> = set.iter().copied().collect();
    let _ = kill(group, Signal::SIGTERM);
    signal_all(&first, Signal::SIGTERM);
    let _ = kill(group, Signal::SIGCONT);
    signal_all(&first, Signal::SIGCONT);
    let left = |set: &mut HashSet<i32>| -> Vec<i32> {
        set.extend(members(root, marker));
        set.retain(|p| alive(*p));
        set.iter().copied().collect()
    };
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if left(&mut set).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for _ in 0..100 {
        let _ = kill(group, Signal::SIGKILL);
        let now = left(&mut set);
        if now.is_empty() {
            return;
        }
        // Freeze first so nothing forks between the scan and the kill.
        signal_all(&now, Signal::SIGSTOP);
        let now = left(&mut set);
        signal_all(&now, Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
    }
    tracing::warn!(root, "process tree still has members after 100 kill rounds");
}

/// [`kill_tree`] on a blocking thread, for the async exec paths of the
/// host backends (local and bubblewrap): the grace period sleeps, which
/// must not stall a runtime worker.
pub(crate) async fn kill_tree_async(pid: i32, marker: String, grace: Duration) {
    let _ = tokio::task::spawn_blocking(move || kill_tree(pid, &marker, grace)).await;
}
