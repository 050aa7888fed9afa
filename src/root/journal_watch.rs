//! The journal-failure watch: subscriptions to the opened workspaces'
//! buses, read when a front end ends so that a failed journal append is
//! not lost silently (the tool call itself succeeded; only its record is
//! missing).

use std::sync::{Mutex, PoisonError};

use crate::engine::Workspace;
use crate::engine::events::{Event, Received, Subscriber};

/// Subscribers to every workspace opened through the composition root.
#[derive(Default)]
pub(crate) struct JournalWatch {
    subs: Mutex<Vec<Subscriber>>,
}

impl JournalWatch {
    /// Starts watching `ws`'s bus.
    pub fn watch(&self, ws: &Workspace) {
        self.subs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(ws.events().subscribe());
    }

    /// The journal failures the watched workspaces reported so far, each
    /// distinct message once, as `warning: ...` lines for stderr (e.g. a
    /// read-only copy of a workspace: the command ran, its journal entry
    /// could not be written).
    pub fn warnings(&self) -> Vec<String> {
        let mut subs = self.subs.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<String> = Vec::new();
        for sub in subs.iter_mut() {
            while let Some(r) = sub.try_recv() {
                let Received::Event(env) = r else {
                    continue;
                };
                if let Event::Log {
                    level,
                    source,
                    message,
                } = &env.event
                    && source == "journal"
                    && (level == "warn" || level == "error")
                {
                    let line = format!("warning: {message}");
                    if !out.contains(&line) {
                        out.push(line);
                    }
                }
            }
        }
        out
    }
}
