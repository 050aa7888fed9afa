//! One turn of the TUI's event loop, apart from the waiting (issue 16):
//! terminal input first; then queued task messages and engine events in
//! slices of [`SLICE`], input looked at again between slices, for at most
//! half a frame; input again; the clock; and a frame when one is due, in
//! which a pane parses streamed output for at most the frame's output
//! time ([`LoopState::with_output_time`]).
//!
//! `tui::run`'s loop waits (for a key, a message, an engine event, a stop
//! signal or a deadline) and then calls [`LoopState::turn`]; a test calls
//! it directly with a `TestBackend` terminal, keys on its own channel and
//! output pending, and sees what one turn did ([`TurnReport`]).

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::mpsc;

use super::action::AppMsg;
use super::app::App;
use crate::engine::events::Subscriber;

/// Task messages or engine events handled between two looks at input.
pub const SLICE: usize = 32;

/// A turn that handled terminal input draws once `1 / INPUT_FRAME_DIV` of
/// the frame budget has passed since the last frame, instead of the whole
/// budget (issue 16: key-to-screen latency under a flood).
pub const INPUT_FRAME_DIV: u32 = 4;

/// What the loop keeps from one turn to the next: the frame budget, when
/// it last drew, and whether the screen is out of date.
#[derive(Debug)]
pub struct LoopState {
    /// One frame: `1 / max_fps`.
    budget: Duration,
    /// Something changed since the last frame.
    dirty: bool,
    /// Input was handled since the last frame: the next one is owed
    /// after a quarter of the budget ([`INPUT_FRAME_DIV`]).
    input_owed: bool,
    last_draw: Instant,
    frames: u64,
    /// A pane's output work per frame ([`crate::tui::pane::Ctx::output_time`]).
    output_time: Duration,
    /// Fault injection of the real-terminal tests (`WSBENCH_TUI_FAULT`).
    fault: Fault,
}

/// A fault the real-terminal tests inject into the second frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    None,
    Panic,
    Error,
}

/// What one [`LoopState::turn`] did, in counts (no times).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TurnReport {
    /// Terminal events (keys, resizes, pastes) handled before any task
    /// message or engine event was looked at.
    pub inputs_first: usize,
    /// Terminal events handled in all (those first included).
    pub inputs: usize,
    /// Task messages handled (results, output wake-ups).
    pub messages: usize,
    /// Engine events handled.
    pub events: usize,
    /// A frame was drawn.
    pub drew: bool,
}

impl LoopState {
    /// A loop drawing at most `max_fps` frames a second (at least 1); the
    /// first turn draws.
    pub fn new(max_fps: u32) -> LoopState {
        let budget = Duration::from_secs_f64(1.0 / max_fps.max(1) as f64);
        LoopState {
            budget,
            dirty: true,
            input_owed: false,
            last_draw: Instant::now() - budget,
            frames: 0,
            output_time: crate::tui::pane::OUTPUT_FRAME_TIME,
            fault: Fault::None,
        }
    }

    /// This loop with panes parsing streamed output for at most `t` per
    /// frame (one slice at least; default
    /// [`crate::tui::pane::OUTPUT_FRAME_TIME`]).
    pub fn with_output_time(mut self, t: Duration) -> LoopState {
        self.output_time = t;
        self
    }

    pub(super) fn with_fault(mut self, fault: Fault) -> LoopState {
        self.fault = fault;
        self
    }

    /// Frames drawn so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The loop woke (a message, an event, a timer): the next turn draws
    /// when a frame is due.
    pub fn woke(&mut self) {
        self.dirty = true;
    }

    /// Until when the loop may wait: the next frame when one is owed
    /// (sooner when it answers input), else the app's next timed change
    /// (toast expiry, tick).
    pub fn deadline(&self, app: &App) -> Instant {
        if self.dirty {
            self.last_draw + self.frame_gap()
        } else {
            app.next_deadline()
        }
    }

    /// The least time between the last frame and the next one.
    fn frame_gap(&self) -> Duration {
        if self.input_owed {
            self.budget / INPUT_FRAME_DIV
        } else {
            self.budget
        }
    }

    /// One turn: every pending terminal event; then task messages and
    /// engine events, [`SLICE`] of each at a time with input taken again
    /// between slices, until none is left or half a frame has passed;
    /// input again; the app's clock; then a frame if one is due (one per
    /// `1 / max_fps`, or a quarter of that when the turn handled input:
    /// [`INPUT_FRAME_DIV`]), in which panes parse output for at most the
    /// output time. A pane that ran out of it asks for the next frame
    /// ([`App::needs_frame`]).
    ///
    /// Errors: drawing failed; the injected test fault.
    pub fn turn<B: Backend>(
        &mut self,
        app: &mut App,
        input: &mut mpsc::Receiver<AppMsg>,
        sub: &mut Subscriber,
        term: &mut Terminal<B>,
    ) -> anyhow::Result<TurnReport>
    where
        B::Error: Send + Sync + 'static,
    {
        let mut rep = TurnReport::default();
        rep.inputs_first = take_input(app, input);
        rep.inputs = rep.inputs_first;
        let until = Instant::now() + self.budget / 2;
        loop {
            let messages = app.drain_some(SLICE);
            let mut events = 0;
            while events < SLICE {
                match sub.try_recv() {
                    Some(r) => app.on_engine(r),
                    None => break,
                }
                events += 1;
            }
            rep.messages += messages;
            rep.events += events;
            rep.inputs += take_input(app, input);
            if (messages < SLICE && events < SLICE) || Instant::now() >= until {
                break;
            }
        }
        app.tick();
        // Keys that came while this turn worked are acted on before the
        // frame is drawn (a kill is never drawn late).
        rep.inputs += take_input(app, input);
        if rep.inputs + rep.messages + rep.events > 0 {
            self.dirty = true;
        }
        if rep.inputs > 0 {
            self.input_owed = true;
        }
        // A frame answering a key need not wait out the frame budget that
        // output frames keep (under a flood a frame was just drawn, so a
        // key waited up to a whole frame for its own): it is drawn once a
        // quarter of the budget has passed, so input alone cannot make
        // more than `4 × max_fps` frames a second.
        let due = self.last_draw.elapsed() >= self.frame_gap();
        if self.dirty && due {
            if self.frames == 1 {
                match self.fault {
                    Fault::Panic => {
                        panic!(
                            "{}=panic: a test panic inside the render loop",
                            super::FAULT_ENV
                        )
                    }
                    Fault::Error => anyhow::bail!(
                        "{}=error: a test error from the event loop",
                        super::FAULT_ENV
                    ),
                    Fault::None => {}
                }
            }
            app.cx.output_time = self.output_time;
            term.draw(|f| app.render(f))?;
            self.frames += 1;
            // A pane that ran out of its frame's time (deferred output)
            // gets the next frame without waiting for a message.
            self.dirty = app.needs_frame();
            self.input_owed = false;
            self.last_draw = Instant::now();
            rep.drew = true;
        }
        Ok(rep)
    }
}

/// Handles every pending terminal event; returns how many.
fn take_input(app: &mut App, rx: &mut mpsc::Receiver<AppMsg>) -> usize {
    let mut n = 0;
    while let Ok(m) = rx.try_recv() {
        app.on_msg(m);
        n += 1;
    }
    n
}
