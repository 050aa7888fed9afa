//! Task results: listings, opens, actions done, profile switches, the gc
//! sweep.

use super::cells::user_agent;
use super::{ID, Msg, NEW_TAG, WorkspacesPane};
use crate::manager::display;
use crate::tui::action::Level;
use crate::tui::pane::{Ctx, TaskPane};

impl TaskPane for WorkspacesPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Listed(r) => {
                self.job.done();
                match r {
                    Ok(rows) => {
                        self.rows = rows.clone();
                        self.error = None;
                        cx.workspace_ids = self.ids();
                        cx.workspace_notes = self
                            .rows
                            .iter()
                            .map(|w| {
                                let n = format!("{} · {}", user_agent(w), display::state(w));
                                (w.id.clone(), n)
                            })
                            .collect();
                        if let Some(old) = self.follow_from.take() {
                            self.follow_profile(&old, cx);
                        }
                    }
                    Err(e) => {
                        // In full in Logs (once, not on every refresh).
                        if self.error.as_ref() != Some(e) {
                            let p = cx.manager.as_ref().map_or("", |m| m.profile());
                            cx.effect(crate::tui::action::Effect::Log(
                                crate::tui::action::LogLine::now(
                                    Level::Error,
                                    "workspaces",
                                    format!("listing profile {p}: {e}"),
                                ),
                            ));
                        }
                        self.error = Some(e.clone());
                        self.follow_from = None;
                    }
                }
                self.refilter();
                if self.job.wanted() {
                    self.load(cx);
                }
            }
            Msg::Opened(id, r) => {
                self.opening = None;
                match r {
                    Ok(ws) => {
                        self.failures.remove(id);
                        cx.toast(Level::Info, format!("opened workspace {id}"));
                        cx.switch_workspace(ws.clone());
                    }
                    Err(e) => {
                        self.failures.insert(id.clone(), e.clone());
                        let ids = self.ids();
                        let mut msg = format!("opening {id} failed: {e}");
                        if !ids.contains(id) && id != NEW_TAG {
                            let near = crate::tui::panes::palette::close_matches(id, &ids, 3);
                            if !near.is_empty() {
                                msg.push_str(&format!(" — did you mean {}?", near.join(", ")));
                            }
                        }
                        cx.toast(Level::Error, msg);
                        self.load(cx);
                    }
                }
            }
            Msg::Done(r) => {
                match r {
                    Ok(m) => cx.toast(Level::Info, m.clone()),
                    Err(e) => cx.toast(Level::Error, e.clone()),
                }
                self.load(cx);
            }
            Msg::Gc { act, found } => self.gc_found(*act, found, cx),
            Msg::Profile(name, r) => match r {
                Ok(m) => {
                    cx.switch_manager(m.clone());
                    self.follow_from =
                        Some(std::mem::replace(&mut cx.header.profile, name.clone()));
                    self.failures.clear();
                    self.rows.clear();
                    cx.workspace_ids.clear();
                    self.refilter();
                    cx.toast(Level::Info, format!("profile {name}"));
                    self.load(cx);
                }
                // Profile errors name the profile already: one lead-in.
                Err(e) if e.contains(&format!("profile `{name}`")) => {
                    cx.toast(Level::Error, e.clone())
                }
                Err(e) => cx.toast(Level::Error, format!("profile {name}: {e}")),
            },
        }
    }
}
