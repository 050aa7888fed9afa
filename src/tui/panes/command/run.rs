//! Running a command: the Bash tool call in the selected session, its
//! output forwarded to the pane, and the status line when it ends.

use std::sync::atomic::Ordering;

use ratatui::style::Modifier;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::OutputChunk;
use crate::engine::shell_session::InputMsg;
use crate::engine::workspace::{CallOptions, ToolCall};
use crate::tui::action::Level;
use crate::tui::pane::{Ctx, TaskPane};
use crate::tui::widgets::text;

use super::output::exit_label;
use super::{CommandPane, ID, Msg};

impl CommandPane {
    /// Runs `command` through the Bash tool in the selected session.
    pub fn run(&mut self, command: String, cx: &mut Ctx) {
        if command.trim().is_empty() {
            return;
        }
        if !cx.can("command.run") {
            cx.toast(Level::Warn, "read-only mode: commands cannot run");
            return;
        }
        if self.running.is_some() {
            cx.toast(Level::Warn, "a command is running: ctrl-c interrupts it");
            return;
        }
        self.remember(&command);
        self.sent.push(command.clone());
        let session = cx.session.clone();
        self.show_session(&session);
        let header = cx.theme.accent.add_modifier(Modifier::BOLD);
        let run = self.begin_run(&command, header);
        let call_id = format!("tui_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let cancel = CancellationToken::new();
        let (itx, irx) = mpsc::channel::<InputMsg>(64);
        if let Some(r) = &mut self.running {
            r.call_id = call_id.clone();
            r.cancel = cancel.clone();
        }
        self.input = Some(itx);
        let _ = run;
        self.follow = true;
        self.back = 0;
        let (otx, mut orx) = mpsc::channel::<OutputChunk>(crate::backend::OUTPUT_CHANNEL_CHUNKS);
        let tx = cx.tasks::<CommandPane>();
        let (merge, woken) = match &self.running {
            Some(r) => (r.merge.clone(), r.woken.clone()),
            None => return,
        };
        // Never waits on the UI: output goes into the merge (bounded,
        // newest kept) and the pane is told once until it takes it.
        // The end comes after every chunk (the tool sends them first);
        // `biased` takes queued chunks before it, so the pane merges all
        // output before it hears of the end.
        let (etx, mut erx) = tokio::sync::oneshot::channel();
        let ended_call = call_id.clone();
        let forward = tokio::spawn(async move {
            let mut ended_open = true;
            loop {
                tokio::select! {
                    biased;
                    chunk = orx.recv() => {
                        let Some(chunk) = chunk else { break };
                        if let Ok(mut m) = merge.lock() {
                            m.push(chunk.stream, chunk.data);
                        }
                        if !woken.swap(true, Ordering::SeqCst) && !tx.send(Msg::Output).await {
                            break;
                        }
                    }
                    end = &mut erx, if ended_open => {
                        ended_open = false;
                        if let Ok(end) = end
                            && !tx.send(Msg::Ended(ended_call.clone(), end)).await
                        {
                            break;
                        }
                    }
                }
            }
            // Keep draining so the tool never blocks on a gone pane.
            while orx.recv().await.is_some() {}
        });
        let ws = cx.ws.clone();
        let call = ToolCall {
            agent: cx.agent.clone(),
            session: cx.session.clone(),
            tool: "Bash".into(),
            args: json!({"command": command, "timeout": cx.ws.limits().bash_max_timeout_ms}),
            call_id: Some(call_id.clone()),
            cancel: Some(cancel),
            output: Some(otx),
        };
        let opts = CallOptions {
            session_shell: Some(self.session_shell),
            input: Some(irx),
            ended: Some(etx),
        };
        cx.spawn::<CommandPane>(async move {
            let r = ws.call_tool_with(call, opts).await;
            // Every chunk reaches the pane before the exit status.
            let _ = forward.await;
            let error = (r.exit_code.is_none() && !r.is_success()).then(|| r.text());
            let notice = r
                .metadata
                .get("shell_notice")
                .and_then(|v| v.as_str())
                .map(String::from);
            let duration_ms = r.metadata.get("duration_ms").and_then(|v| v.as_u64());
            Msg::Finished {
                call_id,
                exit_code: r.exit_code,
                state: r.state.as_str().to_string(),
                timed_out: r.timed_out,
                duration_ms,
                error,
                notice,
            }
        });
    }

    /// Sends `msg` to the running command's input; false when none runs.
    pub(super) fn send_input(&mut self, msg: InputMsg) -> bool {
        match (&self.running, &self.input) {
            (Some(_), Some(tx)) => {
                // A full queue (64 messages unread) drops the newest.
                let _ = tx.try_send(msg);
                true
            }
            _ => false,
        }
    }

    /// Enter while a command runs: the prompt's text and a newline go to
    /// its stdin, and are shown in the output as a terminal would echo.
    pub(super) fn send_line(&mut self, cx: &mut Ctx) {
        let line = format!("{}\n", self.prompt.text());
        self.prompt.clear();
        let st = cx.theme.warn;
        self.feed(crate::backend::StreamKind::Stdout, line.as_bytes(), st);
        self.send_input(InputMsg::Data(line.into()));
    }

    /// The processes of a run the user stopped (Ctrl-C, Ctrl-X) are gone:
    /// its newest output and a status line are shown now, before the
    /// tool has written its tool-result file (up to 64 MiB, which can
    /// take far longer than the kill). The final line, with the call's
    /// one duration, follows in [`Self::finish`]. A run nobody stopped
    /// shows its end once, there.
    fn ended(&mut self, end: &crate::engine::tools::ProcessEnded, cx: &mut Ctx) {
        if !self.running.as_ref().is_some_and(|r| r.stopping) {
            return;
        }
        let (err_style, muted) = (cx.theme.warn, cx.theme.muted);
        self.pull(
            err_style,
            muted,
            super::Pull::Tail(super::STOPPED_TAIL_BYTES),
        );
        self.end_partial_lines(err_style);
        let Some(r) = &self.running else { return };
        let (session, run) = (r.session.clone(), r.run);
        let what = if end.cancelled {
            "✗ killed".to_string()
        } else {
            match end.exit_code {
                Some(c) => format!("✗ exit {}", exit_label(c)),
                None => "✗ ended".to_string(),
            }
        };
        let msg = format!("{what} · the processes are gone; saving the output…");
        self.push_status(&session, run, msg, cx.theme.warn);
    }

    pub(super) fn finish(&mut self, end: &Finished<'_>, cx: &mut Ctx) {
        let (err_style, muted) = (cx.theme.warn, cx.theme.muted);
        // After a kill only the newest output is parsed: the status line
        // must not wait behind output nobody asked to see.
        let how = match &self.running {
            Some(r) if r.stopping => super::Pull::Tail(super::STOPPED_TAIL_BYTES),
            _ => super::Pull::All,
        };
        self.pull(err_style, muted, how);
        self.end_partial_lines(err_style);
        self.raw = false;
        self.input = None;
        let Some(r) = self.running.take() else {
            return;
        };
        let run = r.run;
        let Finished {
            exit_code,
            state,
            timed_out,
            duration_ms,
            error,
            notice,
        } = *end;
        // The tool's own measure when it gave one (the same figure as the
        // journal, Logs and `--json`); the pane's clock only as a fallback.
        let ms = duration_ms.unwrap_or_else(|| r.started.elapsed().as_millis() as u64);
        let took = text::duration_ms(ms);
        let t = &cx.theme;
        let (msg, style) = if let Some(e) = error {
            (
                format!("✗ failed · {}", e.lines().last().unwrap_or(e)),
                t.error,
            )
        } else if timed_out {
            // The exit status (143, SIGTERM) is wsbench's own kill: say so.
            let limit = cx.ws.limits().bash_max_timeout_ms / 1000;
            (
                format!("⏱ killed by wsbench after {limit}s timeout · {took}"),
                t.error,
            )
        } else if state == "interrupted" {
            (format!("✗ killed · {took}"), t.warn)
        } else {
            match exit_code {
                Some(0) => (format!("✓ exit 0 · {took}"), t.success),
                Some(c) => (format!("✗ exit {} · {took}", exit_label(c)), t.error),
                None => (format!("✗ exit ? · {took}"), t.error),
            }
        };
        self.push_status(&r.session, run, msg, style.add_modifier(Modifier::BOLD));
        if let Some(n) = notice {
            self.push_status(&r.session, run, format!("⚠ {n}"), t.warn);
        }
        self.load_journal(cx);
    }
}

/// How a run ended, as [`CommandPane::finish`] reports it.
pub(super) struct Finished<'a> {
    pub(super) exit_code: Option<i32>,
    pub(super) state: &'a str,
    pub(super) timed_out: bool,
    pub(super) duration_ms: Option<u64>,
    pub(super) error: Option<&'a str>,
    /// The session shell's notice (a replaced shell, lost state).
    pub(super) notice: Option<&'a str>,
}

impl TaskPane for CommandPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            // Taken when drawn: this message only wakes the loop.
            Msg::Output => {}
            Msg::Ended(call_id, end)
                if self.running.as_ref().is_some_and(|r| &r.call_id == call_id) =>
            {
                self.ended(end, cx);
            }
            Msg::Finished {
                call_id,
                exit_code,
                state,
                timed_out,
                duration_ms,
                error,
                notice,
            } if self.running.as_ref().is_some_and(|r| &r.call_id == call_id) => {
                let end = Finished {
                    exit_code: *exit_code,
                    state,
                    timed_out: *timed_out,
                    duration_ms: *duration_ms,
                    error: error.as_deref(),
                    notice: notice.as_deref(),
                };
                self.finish(&end, cx);
            }
            Msg::Journal(s, r) if *s == cx.session => match r {
                Ok(entries) => {
                    self.past = entries.clone();
                    if self.history.is_empty() {
                        for e in entries {
                            let c = e.summary();
                            self.remember(&c);
                        }
                    }
                    self.past_cursor.clamp(self.past.len());
                }
                Err(e) => cx.toast(Level::Warn, format!("reading the journal: {e}")),
            },
            _ => {}
        }
    }
}
