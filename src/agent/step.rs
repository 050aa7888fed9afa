//! Step mode: the agent pauses before each model turn and each tool call
//! until someone lets it go on — Enter in `wsbench demo --step`, a key in
//! the TUI.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Default)]
struct Gate {
    stepping: bool,
    credits: u64,
    waiting: Option<String>,
    /// Pauses so far (a new number for each wait that had to pause).
    pauses: u64,
}

/// Controls step mode; cheap to clone, shared by the agent and its UI.
#[derive(Debug, Clone, Default)]
pub struct StepControl {
    gate: Arc<Mutex<Gate>>,
    notify: Arc<Notify>,
}

impl StepControl {
    /// A control starting in step mode (`true`) or running freely.
    pub fn new(stepping: bool) -> Self {
        let c = StepControl::default();
        c.gate.lock().expect("gate lock").stepping = stepping;
        c
    }

    /// Turns step mode on or off; turning it off releases a waiting step.
    pub fn set_stepping(&self, on: bool) {
        let mut g = self.gate.lock().expect("gate lock");
        g.stepping = on;
        if !on {
            g.credits = 0;
        }
        drop(g);
        self.notify.notify_waiters();
    }

    /// True in step mode.
    pub fn is_stepping(&self) -> bool {
        self.gate.lock().expect("gate lock").stepping
    }

    /// Lets exactly one step run (the one waiting now, or the next one).
    pub fn step(&self) {
        self.gate.lock().expect("gate lock").credits += 1;
        self.notify.notify_waiters();
    }

    /// How many times the agent has paused so far: a reader that answers
    /// one pause per input line waits for this to move on, so a line
    /// never lands on a pause already answered.
    pub fn pauses(&self) -> u64 {
        self.gate.lock().expect("gate lock").pauses
    }

    /// What the agent is waiting to run, while it waits.
    pub fn waiting_for(&self) -> Option<String> {
        self.gate.lock().expect("gate lock").waiting.clone()
    }

    /// Waits until `next` may run. Returns at once outside step mode;
    /// calls `on_pause` once when it has to wait. Returns early when
    /// `cancel` fires.
    pub(crate) async fn wait(
        &self,
        next: &str,
        cancel: &CancellationToken,
        on_pause: impl FnOnce(),
    ) {
        let mut on_pause = Some(on_pause);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut g = self.gate.lock().expect("gate lock");
                if !g.stepping {
                    g.waiting = None;
                    return;
                }
                if g.credits > 0 {
                    g.credits -= 1;
                    g.waiting = None;
                    return;
                }
                if g.waiting.is_none() {
                    g.pauses += 1;
                }
                g.waiting = Some(next.to_string());
            }
            if let Some(f) = on_pause.take() {
                f();
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = cancel.cancelled() => {
                    self.gate.lock().expect("gate lock").waiting = None;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_step_releases_one_waiter_and_free_mode_releases_all() {
        let c = StepControl::new(true);
        let cancel = CancellationToken::new();
        let c2 = c.clone();
        let cancel2 = cancel.clone();
        let t = tokio::spawn(async move {
            c2.wait("a", &cancel2, || {}).await;
            c2.wait("b", &cancel2, || {}).await;
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(c.waiting_for().as_deref(), Some("a"));
        c.step();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(c.waiting_for().as_deref(), Some("b"));
        assert!(!t.is_finished());
        c.set_stepping(false);
        tokio::time::timeout(Duration::from_secs(2), t)
            .await
            .unwrap()
            .unwrap();
    }
}
