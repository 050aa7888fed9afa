//! The line-mode shell: what `!` and `wsbench shell` give on a backend
//! with no terminal but shell sessions ([`PtySupport::LineMode`]:
//! OpenSandbox, whose execd keeps a bash per session). Each line read
//! from stdin (the terminal stays in its normal, cooked mode, so the
//! terminal itself echoes and edits the line) runs in the one session:
//! `cd`, `export` and functions carry over. Output is printed as it
//! comes, stdout and stderr apart.
//!
//! What it cannot do, said in the banner: full-screen programs, `isatty`,
//! input to a running line. Ctrl-c while a line runs ends the session
//! (the service cannot interrupt one line of it) and the next line gets a
//! fresh one, with a notice; ctrl-c at the prompt gives a new prompt.
//! `exit` or end of input (ctrl-d) returns.
//!
//! stdin is read by [`attach`](super::attach)'s polling thread, so no
//! read is left pending for the TUI afterwards. A line is at most
//! [`MAX_LINE`] bytes; a longer one is refused whole, with a message.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::{LineShell, OutputChunk, Sandbox, StreamKind};

/// Longest line accepted (bytes, without its newline).
pub const MAX_LINE: usize = 256 * 1024;

/// The prompt, so a line-mode session never looks like a terminal.
pub const PROMPT: &str = "[line mode] $ ";

/// What the line-mode shell tells the user in its banner.
pub fn describe() -> &'static str {
    "LINE MODE, not a terminal: each line runs in one bash session (cd and export carry over); \
     no full-screen programs, no input to a running line; ctrl-c ends the session, exit or ctrl-d returns"
}

/// Runs `command` once in a new session when given, else reads lines
/// until `exit` or end of input. Returns the last line's exit code.
///
/// Errors: the session cannot be opened.
pub async fn run(sb: &dyn Sandbox, command: Option<String>) -> anyhow::Result<Option<i32>> {
    let open = || async {
        sb.line_shell(None)
            .await
            .with_context(|| format!("opening a shell session in the {} sandbox", sb.kind()))
    };
    let mut shell = open().await?;
    if let Some(line) = command {
        let code = run_line(&*shell, &line).await;
        let _ = shell.close().await;
        return Ok(code);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
    let reader = super::attach::stdin_thread(tx, stop.clone());
    let mut pending: Vec<u8> = Vec::new();
    let mut last = Some(0);
    let mut too_long = false;
    prompt();
    'read: loop {
        let chunk = tokio::select! {
            c = rx.recv() => c,
            _ = tokio::signal::ctrl_c() => {
                pending.clear();
                println!();
                prompt();
                continue;
            }
        };
        let Some(chunk) = chunk else { break };
        pending.extend_from_slice(&chunk);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            if too_long {
                too_long = false;
                prompt();
                continue;
            }
            let line = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            let trimmed = line.trim();
            if trimmed == "exit" {
                break 'read;
            }
            if !trimmed.is_empty() {
                let cancel = CancellationToken::new();
                let (code, interrupted) = {
                    let run = run_cancellable(&*shell, &line, cancel.clone());
                    tokio::pin!(run);
                    tokio::select! {
                        code = &mut run => (code, false),
                        _ = tokio::signal::ctrl_c() => {
                            cancel.cancel();
                            (run.await, true)
                        }
                    }
                };
                last = code;
                if interrupted {
                    eprintln!(
                        "\nwsbench: interrupted by ending the bash session; the next line gets a fresh one (cd, variables and functions are lost)"
                    );
                    let _ = shell.close().await;
                    shell = open().await?;
                }
            }
            prompt();
        }
        if pending.len() > MAX_LINE {
            eprintln!("wsbench: a line over {MAX_LINE} bytes was not run");
            pending.clear();
            too_long = true;
        }
    }
    stop.store(true, Ordering::SeqCst);
    let _ = tokio::task::spawn_blocking(move || reader.map(|r| r.join())).await;
    let _ = shell.close().await;
    println!();
    Ok(last)
}

fn prompt() {
    print!("{PROMPT}");
    let _ = std::io::stdout().flush();
}

async fn run_line(shell: &dyn LineShell, line: &str) -> Option<i32> {
    run_cancellable(shell, line, CancellationToken::new()).await
}

/// Runs one line, printing its output; an error is printed and gives
/// `None`.
async fn run_cancellable(
    shell: &dyn LineShell,
    line: &str,
    cancel: CancellationToken,
) -> Option<i32> {
    let (tx, mut rx) = mpsc::channel::<OutputChunk>(64);
    let printing = tokio::spawn(async move {
        while let Some(c) = rx.recv().await {
            match c.stream {
                StreamKind::Stdout => {
                    let mut o = std::io::stdout().lock();
                    let _ = o.write_all(&c.data);
                    let _ = o.flush();
                }
                StreamKind::Stderr => {
                    let mut e = std::io::stderr().lock();
                    let _ = e.write_all(&c.data);
                    let _ = e.flush();
                }
            }
        }
    });
    let out = shell.run(line, Some(tx), Some(cancel)).await;
    let _ = printing.await;
    match out {
        Ok(o) => o.exit_code,
        Err(e) => {
            eprintln!("wsbench: {e}");
            None
        }
    }
}
