//! Opening workspaces: `:ws <text>` resolution, Enter / `:ws` opening,
//! `:profile` switching and, after it, following the user and agent into
//! the new profile.

use super::{Msg, WorkspacesPane, cells::user_agent};
use crate::manager::{WorkspaceInfo, display};
use crate::tui::action::Level;
use crate::tui::pane::Ctx;

/// What `:ws <text>` names among `rows`: an exact id, else the rows whose
/// id starts with it or whose user or agent id equals it.
pub fn resolve_ws<'a>(rows: &'a [WorkspaceInfo], wanted: &str) -> Vec<&'a WorkspaceInfo> {
    if let Some(w) = rows.iter().find(|r| r.id == wanted) {
        return vec![w];
    }
    rows.iter()
        .filter(|r| {
            r.id.starts_with(wanted)
                || r.user.as_deref() == Some(wanted)
                || r.agent.as_deref() == Some(wanted)
        })
        .collect()
}

impl WorkspacesPane {
    /// Opens workspace `id` through the manager and switches the app to
    /// it (`:ws <id>`, Enter). Reports a missing manager or an unknown id.
    pub fn open_id(&mut self, id: &str, cx: &mut Ctx) {
        let Some(m) = cx.manager.clone() else {
            cx.toast(
                Level::Warn,
                "no workspace manager: this TUI was opened on a single directory",
            );
            return;
        };
        let hits = resolve_ws(&self.rows, id);
        let id = match hits[..] {
            [one] => one.id.clone(),
            [] => id.to_string(),
            _ => {
                let names: Vec<String> = hits
                    .iter()
                    .map(|w| format!("{} ({})", w.id, user_agent(w)))
                    .collect();
                cx.toast(
                    Level::Warn,
                    format!("`:ws {id}` matches {}: {}", names.len(), names.join(", ")),
                );
                return;
            }
        };
        let id = id.as_str();
        if id == cx.ws.id() {
            cx.toast(Level::Info, format!("workspace {id} is already open"));
            return;
        }
        self.opening = Some(id.to_string());
        let id = id.to_string();
        cx.spawn::<WorkspacesPane>(async move {
            let r = m.open(&id).await.map_err(|e| e.to_string());
            Msg::Opened(id, r)
        });
    }

    /// Makes the manager of profile `name` the current one (`:profile
    /// <name>`) and lists its workspaces. The open workspace stays open.
    pub fn switch_profile(&mut self, name: &str, cx: &mut Ctx) {
        let Some(make) = cx.manager_factory.clone() else {
            cx.toast(
                Level::Warn,
                "no profiles here: this TUI was opened without the workspace manager",
            );
            return;
        };
        let name = name.to_string();
        cx.spawn::<WorkspacesPane>(async move {
            // Building a provisioner reads config and may probe the
            // backend: off the render loop like everything else.
            let r = make(&name).map_err(|e| format!("{e:#}"));
            Msg::Profile(name, r)
        });
    }

    /// After `:profile`: opens the new profile's workspace of the open
    /// one's user and agent (the session's, when there are several); when
    /// it has none, says so and how to make one (the header marks the open
    /// workspace as `old`'s meanwhile).
    pub(super) fn follow_profile(&mut self, old: &str, cx: &mut Ctx) {
        let (user, agent) = (cx.user_id.clone(), cx.agent.clone());
        let mine: Vec<&WorkspaceInfo> = self
            .rows
            .iter()
            .filter(|w| {
                w.user.as_deref().unwrap_or("") == user && w.agent.as_deref().unwrap_or("") == agent
            })
            .collect();
        let pick = match mine[..] {
            [one] => Some(one.id.clone()),
            [] => None,
            _ => mine
                .iter()
                .find(|w| w.session.as_deref() == Some(cx.session.as_str()))
                .or(mine.first())
                .map(|w| w.id.clone()),
        };
        let p = cx.header.profile.clone();
        match pick {
            Some(id) if id == cx.ws.id() => {}
            Some(id) => {
                cx.toast(
                    Level::Info,
                    format!("profile {p}: opening workspace {id} of the same user and agent"),
                );
                self.open_id(&id, cx);
            }
            None => {
                let short = &cx.ws.id()[..cx.ws.id().len().min(12)];
                cx.toast(
                    Level::Info,
                    format!(
                        "profile {p} has no workspace for user {} agent {}: n creates one; \
                         the open workspace {short} is still profile {old}'s",
                        display::id_or_default(Some(&user)),
                        display::id_or_default(Some(&agent)),
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, user: &str, agent: &str) -> WorkspaceInfo {
        WorkspaceInfo {
            id: id.into(),
            profile: "local".into(),
            backend: crate::backend::BackendKind::Local,
            state: "running".into(),
            reason: None,
            open: false,
            leases: 0,
            user: Some(user.into()),
            agent: Some(agent.into()),
            session: None,
            location: None,
            created_at: None,
            age_secs: None,
            idle_secs: None,
            ttl_left_secs: None,
            labels: Default::default(),
        }
    }

    #[test]
    fn ws_resolves_ids_prefixes_users_and_agents() {
        let rows = vec![
            row("ab12", "alice", "coder"),
            row("ab34", "bob", "coder"),
            row("cd56", "alice", "reviewer"),
            row("ab", "carol", "x"),
        ];
        let ids = |v: Vec<&WorkspaceInfo>| v.iter().map(|w| w.id.clone()).collect::<Vec<_>>();
        // An exact id wins over the ids it prefixes.
        assert_eq!(ids(resolve_ws(&rows, "ab")), ["ab"]);
        assert_eq!(ids(resolve_ws(&rows, "ab3")), ["ab34"]);
        assert_eq!(ids(resolve_ws(&rows, "bob")), ["ab34"]);
        assert_eq!(ids(resolve_ws(&rows, "reviewer")), ["cd56"]);
        assert_eq!(ids(resolve_ws(&rows, "alice")), ["ab12", "cd56"]);
        assert_eq!(ids(resolve_ws(&rows, "coder")), ["ab12", "ab34"]);
        assert!(resolve_ws(&rows, "zz").is_empty());
    }
}
