//! The cells of a row, as `wsbench workspaces list` shows them
//! (`crate::manager::display`).

use crate::manager::{WorkspaceInfo, display};

/// `user/agent` of a row, as `wsbench workspaces list` shows them.
pub(super) fn user_agent(w: &WorkspaceInfo) -> String {
    format!(
        "{}/{}",
        display::id_or_default(w.user.as_deref()),
        display::id_or_default(w.agent.as_deref())
    )
}

/// `idle/ttl left`, in the units of `wsbench workspaces list`.
pub(super) fn idle_ttl(w: &WorkspaceInfo) -> String {
    format!(
        "{}/{}",
        display::span(w.idle_secs),
        display::span(w.ttl_left_secs)
    )
}
