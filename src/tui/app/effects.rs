//! Applying what panes ask for ([`Effect`]): toasts, logs, the selected
//! session, full-screen panes, dialogs, copy, focus and the shell.

use super::chrome::Toast;
use super::overlay::Overlay;
use super::{App, HostRequest};
use crate::tui::action::{Effect, Level, LogLine, PaneEvent};
use crate::tui::panes;
use crate::tui::widgets::line::LineEdit;

impl App {
    pub(super) fn log(&mut self, line: LogLine) {
        for i in 0..self.panes.len() {
            self.panes[i].on_event(&PaneEvent::Log(&line), &mut self.cx);
        }
    }

    /// A toast shown now by the app's clock (without logging it).
    pub(super) fn new_toast(&self, level: Level, msg: String) -> Toast {
        Toast {
            level,
            msg,
            at: (self.cx.clock)(),
        }
    }

    pub(super) fn apply(&mut self, e: Effect) {
        match e {
            Effect::Toast(level, msg) => {
                self.log(LogLine::now(level, "tui", msg.clone()));
                self.toast = Some(self.new_toast(level, msg));
            }
            Effect::Log(line) => self.log(line),
            Effect::SelectSession(id) => {
                if crate::engine::layout::check_session_id(&id).is_err() {
                    self.toast =
                        Some(self.new_toast(Level::Error, format!("invalid session id `{id}`")));
                    return;
                }
                self.cx.session = id;
                for i in 0..self.panes.len() {
                    self.panes[i].on_event(&PaneEvent::SessionChanged, &mut self.cx);
                }
            }
            Effect::OpenEditor(path) => {
                if let Some(i) = self.pane_index(panes::editor::ID) {
                    self.panes[i].on_event(&PaneEvent::Open(&path), &mut self.cx);
                    self.modal = Some(panes::editor::ID);
                }
            }
            Effect::OpenViewer(doc) => {
                if let Some(i) = self.pane_index(panes::viewer::ID) {
                    self.panes[i].on_event(&PaneEvent::Show(&doc), &mut self.cx);
                    self.modal = Some(panes::viewer::ID);
                }
            }
            Effect::OpenLink(target) => {
                if let Some(i) = self.pane_index(panes::viewer::ID) {
                    self.panes[i].on_event(&PaneEvent::Open(&target), &mut self.cx);
                    self.modal = Some(panes::viewer::ID);
                }
            }
            Effect::OpenAt { path, line, back } => {
                if let Some(i) = self.pane_index(panes::viewer::ID) {
                    let ev = PaneEvent::OpenAt {
                        path: &path,
                        line,
                        back,
                    };
                    self.panes[i].on_event(&ev, &mut self.cx);
                    self.modal = Some(panes::viewer::ID);
                }
            }
            Effect::CloseModal => self.modal = None,
            Effect::Reveal(path) => {
                self.set_focus(panes::files::ID);
                self.pane_call::<panes::files::FilesPane, _>(panes::files::ID, |p, cx| {
                    p.reveal(&path, cx)
                });
            }
            Effect::Confirm { pane, message, tag } => {
                self.overlay = Some(Overlay::Confirm { pane, message, tag })
            }
            Effect::Prompt {
                pane,
                title,
                initial,
                tag,
            } => {
                self.overlay = Some(Overlay::Prompt {
                    pane,
                    title,
                    input: LineEdit::new(initial),
                    tag,
                })
            }
            Effect::Choose {
                pane,
                message,
                choices,
                on_cancel,
            } => {
                self.overlay = Some(Overlay::Choose {
                    pane,
                    message,
                    choices,
                    on_cancel,
                })
            }
            Effect::Copy(text) => self.copy(text),
            Effect::Focus(id) => self.set_focus(id),
            // A shell inside the workspace's sandbox, never on the host
            // (issue 17): a backend without a terminal says why.
            Effect::Shell => match crate::root::attach::why_no_shell(&**self.cx.ws.sandbox()) {
                None => self.requests.push(HostRequest::Shell),
                Some(why) => self.toast = Some(self.new_toast(Level::Warn, why)),
            },
        }
    }
}
