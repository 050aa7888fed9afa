//! Copy to the clipboard: a native tool first, then OSC 52 (anchors §4.10).
//!
//! Native tools are tried by what the session has: `wl-copy` under Wayland,
//! `xclip` / `xsel` under X11, `pbcopy` on macOS. Over SSH or on a console
//! none applies and the text goes to the terminal as an OSC 52 sequence,
//! which xterm-likes, kitty, WezTerm, iTerm2 and tmux (`set-clipboard on`)
//! turn into a clipboard write. No crate: the tools are invoked directly.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The native tools to try, in order, for this environment:
/// `(program, args)`.
pub fn native_candidates() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out = Vec::new();
    if cfg!(target_os = "macos") {
        out.push(("pbcopy", vec![]));
    }
    if std::env::var_os("WAYLAND_DISPLAY").is_some() {
        out.push(("wl-copy", vec![]));
    }
    if std::env::var_os("DISPLAY").is_some() {
        out.push(("xclip", vec!["-selection", "clipboard"]));
        out.push(("xsel", vec!["--clipboard", "--input"]));
    }
    out
}

/// Copies with the first native tool that works; returns its name, or an
/// error naming what was tried. Blocking: call from a blocking task.
pub fn copy_native(text: &str) -> Result<&'static str, String> {
    let candidates = native_candidates();
    if candidates.is_empty() {
        return Err("no clipboard tool for this session (no Wayland, X11 or macOS)".into());
    }
    let mut tried = Vec::new();
    for (prog, args) in candidates {
        let child = Command::new(prog)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else {
            tried.push(format!("{prog} (not found)"));
            continue;
        };
        let wrote = child
            .stdin
            .take()
            .map(|mut s| s.write_all(text.as_bytes()))
            .transpose();
        match (wrote, child.wait()) {
            (Ok(_), Ok(st)) if st.success() => return Ok(prog),
            (_, st) => tried.push(format!("{prog} ({st:?})")),
        }
    }
    Err(format!("clipboard tools failed: {}", tried.join(", ")))
}

/// The OSC 52 sequence that sets the clipboard to `text` (crossterm's
/// `CopyToClipboard`, destination `c`), or `None` when the encoded text
/// would be over `max_bytes` (terminals drop long sequences; the size is
/// computed before anything is encoded).
pub fn osc52(text: &str, max_bytes: usize) -> Option<String> {
    let encoded = text.len().div_ceil(3) * 4;
    if encoded > max_bytes {
        return None;
    }
    let mut seq = String::with_capacity(encoded + 16);
    crossterm::Command::write_ansi(
        &crossterm::clipboard::CopyToClipboard::to_clipboard_from(text.as_bytes()),
        &mut seq,
    )
    .ok()?;
    Some(seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_encodes_and_caps() {
        assert_eq!(osc52("hi", 100).unwrap(), "\x1b]52;c;aGk=\x1b\\");
        assert!(osc52(&"x".repeat(100), 10).is_none());
        // The cap is on the encoded size: 9 bytes encode to 12.
        assert!(osc52(&"x".repeat(9), 12).is_some());
        assert!(osc52(&"x".repeat(10), 12).is_none());
    }
}
