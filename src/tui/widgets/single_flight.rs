//! One job in flight, keep the latest request: a pane that reloads a
//! listing or reads a preview starts one task at a time, and what was
//! asked for while it ran is started once it ends (older asks replaced
//! by the newest, so a burst of events costs one more run, not many).
//!
//! Only the bookkeeping lives here; the pane spawns the task itself and
//! calls [`SingleFlight::done`] when its result arrives.

/// State of one single-flight job; `T` is the request (a path to
/// preview, or `()` for "reload").
#[derive(Debug, Clone)]
pub struct SingleFlight<T = ()> {
    running: bool,
    wanted: Option<T>,
}

impl<T> Default for SingleFlight<T> {
    fn default() -> Self {
        SingleFlight {
            running: false,
            wanted: None,
        }
    }
}

impl<T> SingleFlight<T> {
    /// Records `req` as the latest request, replacing an older one not
    /// yet started.
    pub fn want(&mut self, req: T) {
        self.wanted = Some(req);
    }

    /// The request to start now: the latest one, when one is wanted and
    /// no job runs. The job then counts as running until
    /// [`SingleFlight::done`].
    pub fn start(&mut self) -> Option<T> {
        if self.running {
            return None;
        }
        let req = self.wanted.take()?;
        self.running = true;
        Some(req)
    }

    /// [`SingleFlight::want`] then [`SingleFlight::start`].
    pub fn request(&mut self, req: T) -> Option<T> {
        self.want(req);
        self.start()
    }

    /// The running job ended (its result arrived, or it was not started
    /// after all).
    pub fn done(&mut self) {
        self.running = false;
    }

    /// True while a job runs.
    pub fn running(&self) -> bool {
        self.running
    }

    /// True when a request waits (to start after the running job, or on
    /// the next tick).
    pub fn wanted(&self) -> bool {
        self.wanted.is_some()
    }

    /// True when a request waits and nothing runs: start it now.
    pub fn due(&self) -> bool {
        self.wanted.is_some() && !self.running
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_runs_and_the_latest_request_waits() {
        let mut j = SingleFlight::<&str>::default();
        assert_eq!(j.request("a"), Some("a"));
        assert!(j.running());
        assert_eq!(j.request("b"), None);
        assert_eq!(j.request("c"), None);
        assert!(j.wanted());
        assert!(!j.due(), "waits for the running job");
        j.done();
        assert!(j.due());
        assert_eq!(j.start(), Some("c"), "the latest request, once");
        j.done();
        assert_eq!(j.start(), None);
        assert!(!j.running());
    }

    #[test]
    fn a_reload_asked_for_while_idle_is_due() {
        let mut j = SingleFlight::<()>::default();
        j.want(());
        assert!(j.due());
        assert_eq!(j.start(), Some(()));
        assert!(!j.wanted());
    }
}
