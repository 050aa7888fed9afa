//! The session shells of one workspace, one per session id.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::session::ShellSession;
use super::types::ShellOptions;
use crate::backend::Sandbox;

/// Session shells keyed by session id; the Command pane and the Bash tool
/// (with `[tools] bash_session`) of the same session share one.
pub struct ShellSessions {
    sandbox: Arc<dyn Sandbox>,
    opts: ShellOptions,
    map: Mutex<HashMap<String, Arc<ShellSession>>>,
}

impl std::fmt::Debug for ShellSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShellSessions").finish_non_exhaustive()
    }
}

impl ShellSessions {
    /// No shells yet; each starts on first use.
    pub fn new(sandbox: Arc<dyn Sandbox>, opts: ShellOptions) -> Self {
        ShellSessions {
            sandbox,
            opts,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The options new shells start with.
    pub fn options(&self) -> &ShellOptions {
        &self.opts
    }

    /// The sandbox the shells run in.
    pub fn sandbox(&self) -> &Arc<dyn Sandbox> {
        &self.sandbox
    }

    /// The shell of `session`, made on first use.
    pub fn get(&self, session: &str) -> Arc<ShellSession> {
        self.map
            .lock()
            .expect("shells lock")
            .entry(session.to_string())
            .or_insert_with(|| Arc::new(ShellSession::new(self.sandbox.clone(), self.opts.clone())))
            .clone()
    }

    /// The shell of `session` if one was made (to show its directory).
    pub fn peek(&self, session: &str) -> Option<Arc<ShellSession>> {
        self.map.lock().expect("shells lock").get(session).cloned()
    }

    /// Closes every shell (the workspace is going away).
    pub fn close_all(&self) {
        for s in self
            .map
            .lock()
            .expect("shells lock")
            .drain()
            .map(|(_, s)| s)
        {
            s.close();
        }
    }
}
