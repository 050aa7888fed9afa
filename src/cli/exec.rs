//! `wsbench exec`: a command through the Bash tool, output streamed live.

use super::output::say_err;
use std::io::Write as _;

use clap::Args;
use serde_json::json;
use tokio::sync::mpsc;

use super::{Ctx, EXIT_TIMEOUT, output};
use crate::backend::{OutputChunk, StreamKind, path::shell_quote};
use crate::engine::ToolCall;

/// Arguments of `exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Timeout in seconds (default: the Bash tool's 120 s; at most 600 s).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// The command: one argument is a shell line used as is; several are
    /// quoted and joined.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// An unbuffered writer on a duplicate of file descriptor 1 (std's
/// line-buffered stdout when the duplicate cannot be made).
fn raw_stdout() -> Box<dyn std::io::Write + Send> {
    use std::os::fd::AsFd as _;
    match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout()),
    }
}

/// The shell line for the given words.
pub fn command_line(words: &[String]) -> String {
    match words {
        [one] => one.clone(),
        many => many
            .iter()
            .map(|w| shell_quote(w))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

pub(super) async fn run(ctx: &Ctx, args: ExecArgs) -> anyhow::Result<i32> {
    let ws = ctx.root.open_workspace().await?;
    let command = command_line(&args.command);
    let mut call_args = json!({ "command": command });
    if let Some(t) = args.timeout {
        let max = ws.limits().bash_max_timeout_ms as f64 / 1000.0;
        anyhow::ensure!(
            t.is_finite() && t > 0.0 && t <= max,
            "--timeout must be more than 0 and at most {max} seconds (the Bash tool's limit), got {t}"
        );
        call_args["timeout"] = json!((t * 1000.0).round() as u64);
    }
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupted = super::cancel_on_signals(cancel.clone());
    let (tx, mut rx) = mpsc::channel::<OutputChunk>(crate::backend::OUTPUT_CHANNEL_CHUNKS);
    let printer = (!ctx.json).then(|| {
        // Straight to file descriptor 1: std's stdout is line-buffered, so
        // each chunk was scanned for its last newline and copied (issue 16:
        // throughput against `cat`). Nothing else prints to stdout while
        // the command runs; a failed dup falls back to std's handle.
        let mut out = raw_stdout();
        tokio::task::spawn_blocking(move || {
            while let Some(c) = rx.blocking_recv() {
                let _ = match c.stream {
                    StreamKind::Stdout => out.write_all(&c.data),
                    StreamKind::Stderr => std::io::stderr().write_all(&c.data),
                };
            }
            let _ = out.flush();
        })
    });
    let result = ws
        .call_tool(ToolCall {
            agent: ctx.root.global.agent.clone(),
            session: ctx.root.session(),
            tool: "Bash".into(),
            args: call_args,
            output: printer.is_some().then_some(tx),
            cancel: Some(cancel),
            ..Default::default()
        })
        .await;
    if let Some(p) = printer {
        let _ = p.await;
    }
    let signal = interrupted.load(std::sync::atomic::Ordering::SeqCst);
    let code = if signal != 0 {
        128 + signal
    } else if result.timed_out {
        EXIT_TIMEOUT
    } else {
        result.exit_code.unwrap_or(1)
    };
    let offload_error = result
        .metadata
        .get("offload_error")
        .and_then(|v| v.as_str());
    if let (false, Some(e)) = (ctx.json, offload_error) {
        eprintln!("wsbench: the output was cut and the full output could not be saved: {e}");
    }
    if ctx.json {
        output::json(&result)?;
    } else if result.timed_out {
        say_err!(
            "wsbench: {}",
            result.text().lines().next().unwrap_or("timed out")
        );
    } else if result.exit_code.is_none() {
        say_err!("wsbench: {}", result.text());
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::command_line;

    #[test]
    fn joins_words_with_quoting() {
        assert_eq!(command_line(&["echo hi | wc -c".into()]), "echo hi | wc -c");
        assert_eq!(
            command_line(&["sh".into(), "-c".into(), "exit 7".into()]),
            "sh -c 'exit 7'"
        );
    }
}
