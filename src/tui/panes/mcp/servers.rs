//! The MCP pane's servers: listing them (with the tools of the ready
//! ones), acting on one in a task, and what those tasks report.

use std::collections::HashMap;

use crate::tui::action::{Effect, Level};
use crate::tui::pane::{Ctx, TaskPane};

use super::add::reopen_add;
use super::render::short_issue;
use super::{ID, McpPane, Msg, ServerVerb, state_text};

impl McpPane {
    /// Lists the servers again (in a task); after `r` (`reread`) the
    /// declarations are read from `.mcp` first, so servers another
    /// process added or removed show.
    pub(super) fn load(&mut self, cx: &mut Ctx) {
        if self.loading {
            self.dirty = true;
            return;
        }
        self.loading = true;
        self.dirty = false;
        let reread = std::mem::take(&mut self.reread);
        let ws = cx.ws.clone();
        let (agent, session) = (cx.agent.clone(), cx.session.clone());
        self.pair = (agent.clone(), session.clone());
        cx.spawn::<McpPane>(async move {
            let r = async {
                if reread {
                    ws.mcp().reload().await?;
                }
                let listing = ws.mcp().status(&agent, &session).await?;
                let mut tools = HashMap::new();
                // Only ready servers: their instance exists, so asking for
                // it creates nothing and starts nothing.
                for s in listing.servers.iter().filter(|s| s.state.is_ready()) {
                    let inst = ws.mcp().instance(&agent, &session, &s.name).await?;
                    tools.insert(s.name.clone(), inst.tools());
                }
                Ok::<_, crate::engine::WorkspaceError>((listing, tools))
            }
            .await;
            Msg::Listed(r.map_err(|e| e.to_string()))
        });
    }

    /// Uses the selected server as a call would (Enter on a server not
    /// ready): a server lost on its own is started again once its
    /// backoff has passed (counted as a restart), a failed start is
    /// retried after [`crate::engine::mcp::McpOptions::retry_failed_after`]; the
    /// error says when otherwise. Its tools open once it is ready.
    pub(super) fn use_server(&mut self, cx: &mut Ctx) {
        let Some(name) = self.selected().map(|s| s.name.clone()) else {
            return;
        };
        if !self.busy.insert(name.clone()) {
            cx.toast(Level::Info, format!("`{name}` is busy"));
            return;
        }
        self.last_error.remove(&name);
        let ws = cx.ws.clone();
        let (agent, session) = (cx.agent.clone(), cx.session.clone());
        cx.spawn::<McpPane>(async move {
            let r = ws.mcp().server_tools(&agent, &session, &name).await;
            Msg::Used(name, r.map(|_| ()).map_err(|e| e.to_string()))
        });
    }

    /// Runs `verb` on the selected server in a task.
    pub(super) fn server_action(&mut self, verb: ServerVerb, cx: &mut Ctx) {
        let Some(name) = self.selected().map(|s| s.name.clone()) else {
            return;
        };
        // Stop, restart and remove cancel a start in progress.
        if !self.busy.insert(name.clone()) && verb == ServerVerb::Start {
            cx.toast(Level::Info, format!("`{name}` is busy"));
            return;
        }
        self.last_error.remove(&name);
        let ws = cx.ws.clone();
        let (agent, session) = (cx.agent.clone(), cx.session.clone());
        cx.spawn::<McpPane>(async move {
            let r = match verb {
                ServerVerb::Start => ws
                    .mcp()
                    .start(&agent, &session, &name)
                    .await
                    .map(|s| format!("`{name}` {}", state_text(&s.state))),
                ServerVerb::Stop => ws
                    .mcp()
                    .stop(&agent, &session, &name)
                    .await
                    .map(|_| format!("stopped `{name}`")),
                ServerVerb::Restart => ws
                    .mcp()
                    .restart(&agent, &session, &name)
                    .await
                    .map(|s| format!("`{name}` {}", state_text(&s.state))),
                ServerVerb::Remove => ws
                    .mcp()
                    .remove(&name, &agent, &session)
                    .await
                    .map(|_| format!("removed `{name}`")),
            };
            Msg::Acted(name, verb.label(), r.map_err(|e| e.to_string()))
        });
    }
}

impl TaskPane for McpPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Listed(r) => {
                self.loading = false;
                match r {
                    Ok((l, tools)) => {
                        // Skipped entries must not go unnoticed: say
                        // so once each time the set of problems changes.
                        if !l.issues.is_empty() && l.issues != self.issues() {
                            let n = l.issues.len();
                            let first = short_issue(&l.issues[0], cx);
                            let msg = if n == 1 {
                                format!(".mcp: {first}")
                            } else {
                                format!(".mcp: {n} problems (MCP pane lists them); first: {first}")
                            };
                            cx.toast(Level::Warn, msg);
                        }
                        self.listing = Some(l.clone());
                        self.tools = tools.clone();
                        self.error = None;
                    }
                    Err(e) => self.error = Some(e.clone()),
                }
                self.refilter();
                if self.in_tools && !self.selected().is_some_and(|s| s.state.is_ready()) {
                    self.in_tools = false;
                }
                // Enter brought a server back: open its tools once it
                // is ready, if it is still the one selected.
                if let Some(name) = self.open_tools.take()
                    && self
                        .selected()
                        .is_some_and(|s| s.name == name && s.state.is_ready())
                {
                    self.in_tools = true;
                }
                let n = self.selected_tools().len();
                self.tool_cursor.clamp(n);
                if self.dirty || self.pair != (cx.agent.clone(), cx.session.clone()) {
                    self.load(cx);
                }
            }
            Msg::Used(name, r) => {
                self.busy.remove(name);
                match r {
                    Ok(()) => self.open_tools = Some(name.clone()),
                    Err(e) => {
                        self.last_error.insert(name.clone(), e.clone());
                        let first = e.lines().next().unwrap_or_default();
                        cx.toast(Level::Error, format!("`{name}`: {first}"));
                    }
                }
                self.load(cx);
            }
            Msg::Acted(name, verb, r) => {
                self.busy.remove(name);
                match r {
                    Ok(m) => cx.toast(Level::Info, m.clone()),
                    Err(e) => {
                        self.last_error.insert(name.clone(), e.clone());
                        // The details show the rest (stderr tail).
                        let first = e.lines().next().unwrap_or_default();
                        cx.toast(Level::Error, format!("{verb} `{name}`: {first}"));
                    }
                }
                self.load(cx);
            }
            Msg::AddRefused(name, typed, e) => {
                self.busy.remove(name);
                reopen_add(cx, typed, e);
            }
            Msg::Called(name, doc) => {
                self.busy.remove(name);
                cx.effect(Effect::OpenViewer(doc.clone()));
            }
        }
    }
}
