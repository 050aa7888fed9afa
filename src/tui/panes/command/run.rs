//! Running a command: the Bash tool call in the selected session, its
//! output forwarded to the pane, and the status line when it ends.

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

use super::output::{exit_label, stderr_style};
use super::{CommandPane, ID, Msg, OutLine};

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
        let (otx, mut orx) = mpsc::channel::<OutputChunk>(256);
        let tx = cx.tasks::<CommandPane>();
        let cid = call_id.clone();
        let forward = tokio::spawn(async move {
            while let Some(chunk) = orx.recv().await {
                if !tx.send(Msg::Chunk(cid.clone(), chunk)).await {
                    break;
                }
            }
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
            Msg::Finished {
                call_id,
                exit_code: r.exit_code,
                state: r.state.as_str().to_string(),
                timed_out: r.timed_out,
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

    pub(super) fn finish(
        &mut self,
        exit_code: Option<i32>,
        state: &str,
        timed_out: bool,
        error: Option<&str>,
        notice: Option<&str>,
        cx: &mut Ctx,
    ) {
        self.raw = false;
        self.input = None;
        let Some(mut r) = self.running.take() else {
            return;
        };
        let run = r.run;
        let err_style = cx.theme.warn;
        let out = self.ring_for(&r.session);
        r.out.finish(&mut |l| {
            out.push(OutLine { run, line: l });
        });
        r.err.finish(&mut |mut l| {
            stderr_style(&mut l, err_style);
            out.push(OutLine { run, line: l });
        });
        let took = text::duration_ms(r.started.elapsed().as_millis() as u64);
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

impl TaskPane for CommandPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Chunk(cid, chunk) if self.running.as_ref().is_some_and(|r| &r.call_id == cid) => {
                let st = cx.theme.warn;
                self.feed(chunk.stream, &chunk.data, st);
            }
            Msg::Finished {
                call_id,
                exit_code,
                state,
                timed_out,
                error,
                notice,
            } if self.running.as_ref().is_some_and(|r| &r.call_id == call_id) => {
                let (e, n) = (error.clone(), notice.clone());
                self.finish(
                    *exit_code,
                    state,
                    *timed_out,
                    e.as_deref(),
                    n.as_deref(),
                    cx,
                );
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
