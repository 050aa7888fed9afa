//! Backend notices: what a backend saw while provisioning or running a
//! workspace, routed to the manager's event bus.

use std::sync::Arc;

use serde::Serialize;

/// How much a [`BackendNotice`] matters; the names are the levels of the
/// engine's `Event::Log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoticeLevel {
    /// Routine detail (every exec in a Pod).
    Debug,
    /// A step of provisioning or teardown.
    Info,
    /// Something that may need attention.
    Warn,
    /// A failure the user must act on (an image that cannot be pulled).
    Error,
}

impl NoticeLevel {
    /// `debug`, `info`, `warn` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeLevel::Debug => "debug",
            NoticeLevel::Info => "info",
            NoticeLevel::Warn => "warn",
            NoticeLevel::Error => "error",
        }
    }
}

/// Something a backend saw while provisioning or running a workspace
/// that the user should be able to see in a log (a Pod's phase, an image
/// pull failing, a command started in a remote sandbox).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendNotice {
    /// Workspace id it concerns.
    pub workspace_id: String,
    /// Who says it: the backend's name (`kubernetes`).
    pub source: String,
    /// How much it matters.
    pub level: NoticeLevel,
    /// One line for a human.
    pub message: String,
}

/// Receives [`BackendNotice`]s; called inline, so it must not block.
pub type NoticeSink = Arc<dyn Fn(BackendNotice) + Send + Sync>;

/// A provisioner's notice sink, set by the manager after construction
/// (hence the lock) and read once per workspace operation.
#[derive(Default)]
pub(crate) struct NoticeSlot(std::sync::RwLock<Option<NoticeSink>>);

impl NoticeSlot {
    /// Replaces the sink (the last manager to set it wins).
    pub(crate) fn set(&self, sink: NoticeSink) {
        *self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(sink);
    }

    /// One closure for a workspace's typed backend events `E`: each goes
    /// to `events` (the provisioner's own typed sink) and, turned into a
    /// [`BackendNotice`] for `workspace_id` by `notice`, to the notice
    /// sink. `None` when neither is set, so callers skip building events.
    pub(crate) fn sink_for<E: 'static>(
        &self,
        events: Option<Arc<dyn Fn(E) + Send + Sync>>,
        workspace_id: &str,
        notice: fn(&E, &str) -> BackendNotice,
    ) -> Option<Arc<dyn Fn(E) + Send + Sync>> {
        let notices = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if notices.is_none() && events.is_none() {
            return None;
        }
        let id = workspace_id.to_string();
        Some(Arc::new(move |ev: E| {
            if let Some(n) = &notices {
                n(notice(&ev, &id));
            }
            if let Some(e) = &events {
                e(ev);
            }
        }))
    }
}
