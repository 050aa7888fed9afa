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
    /// Field 22 of `/proc/<pid>/stat`: clock ticks after boot at which the
    /// process started. With the pid it names one process for good.
    start: u64,
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
    // Fields 7..=21 lie between the session (6) and the start time (22).
    let start = it.nth(15)?.parse().ok()?;
    Some(ProcStat {
        ppid,
        pgid,
        sid,
        zombie: state == "Z" || state == "X",
        start,
    })
}

/// The start time of `pid` (field 22 of `/proc/<pid>/stat`, clock ticks
/// after boot), `None` when no such process exists (a zombie still has
/// one). Taken right after spawning a tree's root, while the child is
/// unreaped, it lets [`kill_tree_of`] tell the root from a later process
/// that got the same pid.
pub fn start_time(pid: i32) -> Option<u64> {
    read_stat(pid).map(|st| st.start)
}

/// Whether `pid` is still the process that started at `start` (alive or a
/// zombie). `None` for `start` means "not known": trusted, as before.
fn same_root(pid: i32, start: Option<u64>) -> bool {
    match start {
        None => true,
        Some(t) => start_time(pid) == Some(t),
    }
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
    members_of(root, true, marker)
}

/// [`members`], with the root's group, session and descendants left out
/// when `by_root` is false (the root's pid now names another process):
/// then only the marker finds members.
fn members_of(root: i32, by_root: bool, marker: &str) -> Vec<i32> {
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
    let mut stack = if by_root { vec![root] } else { Vec::new() };
    while let Some(p) = stack.pop() {
        if found.insert(p)
            && let Some(kids) = children.get(&p)
        {
            stack.extend(kids);
        }
    }
    for (pid, st) in &stats {
        let of_root = by_root && (st.pgid == root || st.sid == root);
        if of_root || has_marker(*pid, &needle) {
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
/// most `grace` plus about a second) would be signalled too; the root's
/// own pid is guarded by [`kill_tree_of`].
pub fn kill_tree(root: i32, marker: &str, grace: Duration) {
    kill_tree_of(root, None, marker, grace)
}

/// [`kill_tree`] for a root that started at `root_start` (from
/// [`start_time`] right after the spawn): before every signal to the
/// root's group and every walk from the root, the pid is checked to still
/// name that process (alive or an unreaped zombie). Once it does not — the
/// root was reaped by someone else (tokio, on a `wait`) and the pid may
/// belong to an unrelated process group by now (pid_max is small) — the
/// group, session and descendant links are dropped and only the marker
/// finds members. Dropping them loses nothing of ours: Linux does not reuse
/// a pid while a process group or session of that number has members.
/// Limit: a check and the signal after it are not atomic; the window is a
/// few microseconds, against the whole kill before.
pub fn kill_tree_of(root: i32, root_start: Option<u64>, marker: &str, grace: Duration) {
    let ours = || same_root(root, root_start);
    let group_signal = |sig: Signal| {
        if ours() {
            let _ = kill(Pid::from_raw(-root), sig);
        }
    };
    let members = |root: i32, marker: &str| members_of(root, ours(), marker);
    group_signal(Signal::SIGSTOP);
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
    group_signal(Signal::SIGTERM);
    signal_all(&first, Signal::SIGTERM);
    group_signal(Signal::SIGCONT);
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
        group_signal(Signal::SIGKILL);
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
    kill_tree_of_async(pid, None, marker, grace).await
}

/// [`kill_tree_of`] on a blocking thread (see [`kill_tree_async`]).
pub(crate) async fn kill_tree_of_async(
    pid: i32,
    start: Option<u64>,
    marker: String,
    grace: Duration,
) {
    let _ = tokio::task::spawn_blocking(move || kill_tree_of(pid, start, &marker, grace)).await;
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    use super::*;

    /// A `sleep` leading its own process group, like a command of another
    /// workspace that got a pid we used before.
    fn group_leader() -> Child {
        Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep")
    }

    fn running(child: &mut Child) -> bool {
        child.try_wait().expect("try_wait").is_none()
    }

    #[test]
    fn start_time_names_one_process() {
        let mut a = group_leader();
        let pid = a.id() as i32;
        let t = start_time(pid).expect("a live child has a start time");
        assert_eq!(start_time(pid), Some(t), "stable while it lives");
        a.kill().unwrap();
        a.wait().unwrap();
        assert_eq!(start_time(pid), None, "reaped: no such process");
    }

    /// Issue 15's flake: the root was reaped and its pid reused by an
    /// unrelated group leader; the kill must leave that process alone.
    #[test]
    fn a_kill_never_signals_a_reused_root_pid() {
        let mut other = group_leader();
        let pid = other.id() as i32;
        let t = start_time(pid).unwrap();
        // The stale start time stands for "our root started then".
        kill_tree_of(
            pid,
            Some(t.wrapping_sub(1)),
            "no-such-marker",
            Duration::ZERO,
        );
        std::thread::sleep(Duration::from_millis(50));
        assert!(running(&mut other), "the unrelated group was signalled");
        // The same call with the right start time kills it: the guard is
        // what spared it, not a kill that does nothing.
        kill_tree_of(pid, Some(t), "no-such-marker", Duration::ZERO);
        let status = other.wait().unwrap();
        assert!(!status.success(), "killed, not exited: {status:?}");
    }

    /// With the root's pid reused, members that carry the marker are still
    /// found and killed.
    #[test]
    fn a_reused_root_still_kills_the_marked_members() {
        let marker = "pt-test-marker-reuse";
        let mut marked = Command::new("sleep")
            .arg("30")
            .env(MARKER_VAR, marker)
            .spawn()
            .unwrap();
        let mut other = group_leader();
        let pid = other.id() as i32;
        let t = start_time(pid).unwrap();
        kill_tree_of(pid, Some(t.wrapping_add(1)), marker, Duration::ZERO);
        assert!(!marked.wait().unwrap().success());
        assert!(running(&mut other));
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
