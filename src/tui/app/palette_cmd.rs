//! What palette commands do (`:session`, `:theme`, `:ws`, `:profile`,
//! `:agent`, actions by name).

use super::App;
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent};
use crate::tui::panes;
use crate::tui::panes::palette::{Completions, PaletteCommand};
use crate::tui::theme::Theme;

impl App {
    /// What the palette completes from now.
    pub(super) fn completions(&self) -> Completions {
        Completions {
            actions: self
                .cx
                .keymap
                .all()
                .iter()
                .map(|b| b.spec.name.to_string())
                .collect(),
            labels: self
                .cx
                .keymap
                .all()
                .iter()
                .map(|b| {
                    (
                        b.spec.name.to_string(),
                        panes::palette::action_label(&b.spec),
                    )
                })
                .collect(),
            themes: crate::tui::theme::Theme::available(self.theme_dir.as_deref()),
            sessions: self.cx.sessions.clone(),
            workspaces: self.cx.workspace_ids.clone(),
            workspace_notes: self.cx.workspace_notes.clone(),
            profiles: self.cx.profiles.clone(),
            searches: self.cx.recent_searches.clone(),
            unavailable_profiles: self.cx.unavailable_profiles.clone(),
        }
    }

    /// `:session <id>`: selects a session the workspace has; an unknown
    /// id is refused with the close matches (a typo must not silently
    /// scope every pane to an empty session).
    pub(super) fn palette_session(&mut self, id: String) {
        if id == self.cx.session {
            self.apply(Effect::Toast(
                Level::Info,
                format!("session {id} is already selected"),
            ));
            return;
        }
        if self.cx.sessions.contains(&id) {
            self.apply(Effect::SelectSession(id));
            return;
        }
        let mut known = self.cx.sessions.clone();
        if !known.contains(&self.cx.session) {
            known.push(self.cx.session.clone());
        }
        let near = panes::palette::close_matches(&id, &known, 3);
        let msg = if near.is_empty() {
            format!("no session `{id}` in this workspace (`:session new {id}` starts one)")
        } else {
            format!(
                "no session `{id}`: did you mean {}? (`:session new {id}` starts one)",
                near.join(", ")
            )
        };
        self.apply(Effect::Toast(Level::Warn, msg));
    }

    pub(super) fn run_palette(&mut self, cmd: PaletteCommand) {
        match cmd {
            PaletteCommand::Quit => self.request_quit(),
            PaletteCommand::Session(id) => self.palette_session(id),
            PaletteCommand::NewSession(id) => {
                if self.cx.sessions.contains(&id) || id == self.cx.session {
                    self.palette_session(id);
                    return;
                }
                if let Err(e) = crate::engine::layout::check_session_id(&id) {
                    self.apply(Effect::Toast(Level::Error, e.to_string()));
                    return;
                }
                self.apply(Effect::SelectSession(id.clone()));
                self.apply(Effect::Toast(
                    Level::Info,
                    format!("new session {id}: its first command or agent run creates it"),
                ));
            }
            PaletteCommand::Theme(name) => match Theme::load(&name, self.theme_dir.as_deref()) {
                Ok(t) => {
                    self.cx.theme = if crate::tui::theme::no_color_requested() {
                        t.monochrome()
                    } else {
                        t
                    };
                    self.apply(Effect::Toast(Level::Info, format!("theme {name}")));
                }
                Err(e) => self.apply(Effect::Toast(Level::Error, e.to_string())),
            },
            PaletteCommand::Action(name) => self.run_action(&name),
            PaletteCommand::Agent(setting) => {
                self.set_focus(panes::agent::ID);
                self.with_pane(panes::agent::ID, |p, cx| {
                    p.on_event(
                        &PaneEvent::Input {
                            tag: DialogTag::AgentModel,
                            text: setting,
                        },
                        cx,
                    )
                });
            }
            PaletteCommand::Grep(args) => {
                self.set_focus(panes::grep::ID);
                self.pane_call::<panes::grep::GrepPane, _>(panes::grep::ID, |p, cx| {
                    p.command(&args, cx)
                });
            }
            PaletteCommand::OpenWorkspace(arg) => self.palette_manager("ws", &arg),
            PaletteCommand::SwitchProfile(arg) => self.palette_manager("profile", &arg),
            PaletteCommand::Unknown(text) => self.apply(Effect::Toast(
                Level::Warn,
                format!("unknown command `{text}` (Tab completes)"),
            )),
        }
    }

    /// `:ws <id>` and `:profile <name>` (`cmd`): done by the Workspaces
    /// pane, which has the manager.
    fn palette_manager(&mut self, cmd: &str, arg: &str) {
        if arg.is_empty() {
            let msg = format!("`:{cmd}` needs an argument (`:{cmd} <name>`)");
            self.apply(Effect::Toast(Level::Warn, msg));
            return;
        }
        let id = panes::workspaces::ID;
        let done = self.pane_call::<panes::workspaces::WorkspacesPane, _>(id, |p, cx| {
            if cmd == "ws" {
                p.open_id(arg, cx)
            } else {
                p.switch_profile(arg, cx)
            }
        });
        if done.is_none() {
            self.apply(Effect::Toast(
                Level::Warn,
                format!("`:{cmd} {arg}`: no Workspaces pane"),
            ));
        }
    }
}
