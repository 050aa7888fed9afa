//! Acting on the selected workspace: open, retry, describe, close,
//! destroy (behind a confirmation).

use super::{ID, Msg, WorkspacesAction, WorkspacesPane};
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
                let Some(m) = cx.manager.clone() else { return };
                cx.spawn::<WorkspacesPane>(async move {
                    Msg::Done(match m.close(&id).await {
                        Ok(true) => Ok(format!("closed {id}")),
                        Ok(false) => Err(format!("no workspace {id}")),
                        Err(e) => Err(e.to_string()),
                    })
                });
            }
            WorkspacesAction::Destroy => cx.effect(crate::tui::action::Effect::Confirm {
                pane: ID,
                message: format!("Destroy workspace {id} and all its files?"),
                tag: DialogTag::WorkspaceDestroy { id },
            }),
            _ => {}
        }
    }
}
