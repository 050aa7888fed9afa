//! Acting on the selected workspace: open, retry, describe, close,
//! destroy (behind a confirmation).

use super::{ID, Msg, WorkspacesAction, WorkspacesPane};
use crate::manager::display;
use crate::tui::action::{DialogTag, Level};
use crate::tui::pane::Ctx;

impl WorkspacesPane {
    pub(super) fn act_on_selected(&mut self, action: WorkspacesAction, cx: &mut Ctx) {
        let Some(w) = self.selected() else {
            return;
        };
        let id = w.id.clone();
        let failed = w.state == "failed" || self.failures.contains_key(&id);
        match action {
            WorkspacesAction::Open => self.open_id(&id, cx),
            WorkspacesAction::Retry if failed => {
                self.failures.remove(&id);
                self.open_id(&id, cx)
            }
            WorkspacesAction::Retry => cx.toast(Level::Info, format!("{id} has not failed")),
            WorkspacesAction::Describe => {
                // The open workspace's layout is known here; another's
                // lives at its `location`.
                let paths = if id == cx.ws.id() {
                    crate::tui::panes::describe::layout_paths(cx.ws.layout())
                } else {
                    Vec::new()
                };
                let doc = crate::tui::panes::describe::doc("workspace", &id, w, &paths, &cx.theme);
                cx.effect(crate::tui::action::Effect::OpenViewer(doc));
            }
            WorkspacesAction::Close | WorkspacesAction::Destroy if id == cx.ws.id() => cx.toast(
                Level::Warn,
                format!("{id} is the open workspace: open another one first"),
            ),
            WorkspacesAction::Close => {
                let owner = owner_note(w.user.as_deref(), &cx.user_id);
                cx.effect(crate::tui::action::Effect::Confirm {
                    pane: ID,
                    message: format!("Close (suspend) workspace {id}{owner}?"),
                    tag: DialogTag::WorkspaceClose { id },
                })
            }
            WorkspacesAction::Destroy => {
                let owner = owner_note(w.user.as_deref(), &cx.user_id);
                cx.effect(crate::tui::action::Effect::Confirm {
                    pane: ID,
                    message: format!("Destroy workspace {id}{owner} and all its files?"),
                    tag: DialogTag::WorkspaceDestroy { id },
                })
            }
            _ => {}
        }
    }
}

impl WorkspacesPane {
    /// Closes (suspends) workspace `id` on a task, after the dialog's yes.
    pub(super) fn close_confirmed(&mut self, id: &str, cx: &mut Ctx) {
        let Some(m) = cx.manager.clone() else { return };
        let id = id.to_string();
        cx.spawn::<WorkspacesPane>(async move {
            Msg::Done(match m.close(&id).await {
                Ok(true) => Ok(format!("closed {id}")),
                Ok(false) => Err(format!("no workspace {id}")),
                Err(e) => Err(e.to_string()),
            })
        });
    }
}

/// `" of user bob"` when the workspace's user label is not `me` (the
/// user id this TUI creates workspaces for; `""` is the default user), so
/// a question about another user's workspace names its owner; else `""`.
pub(super) fn owner_note(owner: Option<&str>, me: &str) -> String {
    let owner = owner.unwrap_or("");
    if owner == me {
        String::new()
    } else {
        format!(" of user {}", display::id_or_default(Some(owner)))
    }
}

#[cfg(test)]
mod tests {
    use super::owner_note;

    #[test]
    fn questions_name_another_users_owner_only() {
        assert_eq!(owner_note(Some("alice"), "alice"), "");
        assert_eq!(owner_note(None, ""), "");
        assert_eq!(owner_note(Some("bob"), "alice"), " of user bob");
        assert!(owner_note(None, "alice").starts_with(" of user "));
    }
}
