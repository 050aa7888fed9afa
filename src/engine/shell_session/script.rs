//! The shell text wsbench writes to a session shell's stdin: the set-up
//! sent once when the shell starts, and one frame per command.
//!
//! Why the frame looks as it does:
//! * the command runs in the shell itself (`command eval` inside a
//!   function), so `cd`, `export`, variables and functions stay; `command`
//!   keeps a syntax error from ending a POSIX shell, and the function lets
//!   `return` end just the command;
//! * its stdin is `/dev/null` or the session's input FIFO, never the
//!   shell's own stdin, so `cat` or `read` cannot eat the next frames;
//! * fds 8 and 9 keep the shell's original stdout and stderr for the end
//!   token, so `exec >file` in a command does not hide the end; they are
//!   closed for the command itself;
//! * `WSBENCH_CMD_ID` marks every program the command starts, so Ctrl-C
//!   can find them (the backend's own marker stays the shell's).
//!
//! The watcher started by the set-up is a subshell in the shell's own
//! namespace (so it works in bubblewrap, whose every exec has its own PID
//! namespace): it reads `INT <marker>` lines from the control FIFO and
//! sends SIGINT to the shell (first, so its trap is pending when the
//! foreground program dies) and to every process whose environment holds
//! the marker. It finds them with `grep -z` over `/proc/*/environ` (GNU
//! grep, BusyBox ≥ 1.30); without it only the shell gets the signal.

/// Name of the variable that marks a command's processes.
pub(crate) const CMD_VAR: &str = "WSBENCH_CMD_ID";

/// Quotes `s` as one shell word ([`crate::backend::path::shell_quote`]).
pub(crate) fn quote(s: &str) -> String {
    crate::backend::path::shell_quote(s)
}

/// The set-up: saves fds 8/9, makes a private directory with the input and
/// control FIFOs under `$TMPDIR` (or `/tmp`), starts the watcher, defines
/// the helpers, and prints the ready token of `nonce` whose trailer is
/// ` 0 <fifo dir>`.
pub(crate) fn setup(nonce: &str, id: &str) -> String {
    format!(
        r#"exec 8>&1 9>&2
__wsb_d="${{TMPDIR:-/tmp}}/wsbench-shell-{id}"
mkdir -m 700 "$__wsb_d" && mkfifo "$__wsb_d/in" "$__wsb_d/ctl" || __wsb_d=
__wsb_run() {{ command eval "$__wsb_c"; }}
__wsb_end() {{ command printf '\036WSB%s %s %s\037\n' "$1" "$2" "$PWD" >&8; command printf '\036WSB%s\037' "$1" >&9; }}
if [ -n "$__wsb_d" ]; then
( trap '' INT; while :; do
  read -r __wsb_s __wsb_m < "$__wsb_d/ctl" || break
  [ "$__wsb_s" = INT ] || continue
  kill -INT $$ 2>/dev/null
  grep -lzsx "{CMD_VAR}=$__wsb_m" /proc/[0-9]*/environ 2>/dev/null | while read -r __wsb_f; do
    __wsb_p=${{__wsb_f#/proc/}}; kill -INT "${{__wsb_p%/environ}}" 2>/dev/null
  done
done ) </dev/null >/dev/null 2>&1 8>&- 9>&- &
__wsb_w=$!
trap 'kill $__wsb_w 2>/dev/null; rm -rf "$__wsb_d"' EXIT
fi
trap : INT
command printf '\036WSB%s 0 %s\037\n' {nonce} "$__wsb_d" >&8; command printf '\036WSB%s\037' {nonce} >&9
"#
    )
}

/// One command's frame: runs `command` with stdin from `stdin` (a path in
/// the sandbox) under the process marker `marker`, then prints the end
/// token of `nonce` with the status and `$PWD`.
pub(crate) fn frame(command: &str, stdin: &str, marker: &str, nonce: &str) -> String {
    format!(
        "__wsb_c={}; {CMD_VAR}={marker}; export {CMD_VAR}; __wsb_run <{} 8>&- 9>&-; __wsb_end {nonce} $?\n",
        quote(command),
        quote(stdin)
    )
}

/// The line the watcher takes to interrupt the command marked `marker`.
pub(crate) fn interrupt_line(marker: &str) -> String {
    format!("INT {marker}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("printf %s {}", quote("a'b \"c\" $x"))])
            .output()
            .unwrap();
        assert_eq!(out.stdout, b"a'b \"c\" $x");
    }

    #[test]
    fn setup_and_frame_parse_as_shell() {
        let text = setup("n", "id") + &frame("echo 'hi'", "/dev/null", "m", "n");
        let ok = std::process::Command::new("sh")
            .args(["-n", "-c", &text])
            .status()
            .unwrap()
            .success();
        assert!(ok, "{text}");
    }
}
