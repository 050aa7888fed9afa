//! The Command pane's output: one ring per session (the shown one and
//! the parked ones), fed by the running command, and drawn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use tokio_util::sync::CancellationToken;

use crate::backend::{OutputChunk, StreamKind};
use crate::engine::bus::OutputMerge;
use crate::tui::pane::{Ctx, placeholder};
use crate::tui::widgets::ansi::{AnsiParser, StyledLine};
use crate::tui::widgets::ring::Ring;
use crate::tui::widgets::text;

use super::{CommandPane, OutLine, Running};

impl CommandPane {
    /// Appends raw output bytes of the current run as if they came from
    /// `stream` (the streaming path; public for benchmarks and tests).
    pub fn feed(&mut self, stream: StreamKind, data: &[u8], err_style: Style) {
        let Some(r) = &mut self.running else {
            return;
        };
        let run = r.run;
        let parser = match stream {
            StreamKind::Stdout => &mut r.out,
            StreamKind::Stderr => &mut r.err,
        };
        let out = if r.session == self.output_session {
            &mut self.output
        } else {
            let (cap, bytes) = (self.output.capacity(), self.budget_bytes);
            self.parked
                .entry(r.session.clone())
                .or_insert_with(|| Ring::with_budget(cap, bytes))
        };
        parser.feed(data, &mut |mut l| {
            if stream == StreamKind::Stderr {
                stderr_style(&mut l, err_style);
            }
            push_line(out, OutLine { run, line: l });
        });
    }

    /// Takes what the running command printed since the last call (at
    /// most `output_frame_bytes`, the newest) into the ring, as `how`
    /// says; the bytes that did not fit are named on a line of their own.
    /// Called once a frame (when drawn, [`Pull::Until`]) and before the
    /// exit status ([`Pull::All`], or [`Pull::Tail`] after a kill).
    ///
    /// With [`Pull::Until`] the bytes are parsed [`PULL_SLICE`] at a time
    /// and the deadline is looked at between slices: what is left when it
    /// passes goes back into the run's merge, in front of newer output,
    /// and is taken first next frame ([`Self::has_deferred_output`] asks
    /// for that frame). So a frame's output work is bounded in time
    /// whatever the rate, and nothing is dropped but what the merge's
    /// byte cap drops (counted, and named in the pane).
    pub(super) fn pull(&mut self, err_style: Style, muted: Style, how: Pull) {
        let Some(r) = &mut self.running else {
            return;
        };
        r.woken.store(false, Ordering::SeqCst);
        r.deferred = false;
        let merge = r.merge.clone();
        let mut merged = match merge.lock() {
            Ok(mut m) => m.take(),
            Err(_) => return,
        };
        let (run, session) = (r.run, r.session.clone());
        if let Pull::Tail(keep) = how {
            merged.skipped += cut_to_tail(&mut merged.chunks, keep);
        }
        self.skipped += merged.skipped;
        if merged.skipped > 0 {
            // The lines around the gap are cut: end the partial ones so
            // the note sits between them.
            self.end_partial_lines(err_style);
            let note = format!(
                "… {} of output skipped (printed faster than the screen shows; the journal and offload keep it)",
                text::human_size(merged.skipped)
            );
            let l = StyledLine::plain(&note, muted);
            push_line(self.ring_for(&session), OutLine { run, line: l });
        }
        let until = match how {
            Pull::Until(t) => Some(t),
            Pull::All | Pull::Tail(_) => None,
        };
        let mut chunks = merged.chunks.into_iter();
        while let Some(c) = chunks.next() {
            let mut at = 0;
            while at < c.data.len() {
                let end = (at + PULL_SLICE).min(c.data.len());
                self.feed(c.stream, &c.data[at..end], err_style);
                self.parsed += (end - at) as u64;
                at = end;
                if until.is_some_and(|t| Instant::now() >= t) {
                    // Out of time: the rest waits for the next frame.
                    let mut rest = Vec::new();
                    if at < c.data.len() {
                        rest.push(OutputChunk {
                            stream: c.stream,
                            data: c.data.slice(at..),
                        });
                    }
                    rest.extend(chunks);
                    if let Ok(mut m) = merge.lock() {
                        m.put_back(rest);
                    }
                    if let Some(r) = &mut self.running {
                        r.deferred = true;
                    }
                    return;
                }
            }
        }
    }

    /// Whether the last frame ran out of time and left output in the
    /// run's merge: the loop then draws again next frame without waiting
    /// for a message (new output wakes it anyway).
    pub fn has_deferred_output(&self) -> bool {
        self.running.as_ref().is_some_and(|r| r.deferred)
    }

    /// Bytes of command output taken from the runs' merges and parsed
    /// into the rings since the pane was made (skipped bytes are not
    /// counted): what a frame's output work cost, for tests and
    /// benchmarks.
    pub fn parsed_bytes(&self) -> u64 {
        self.parsed
    }

    /// Bytes waiting in the running command's merge (tests).
    pub fn waiting_output(&self) -> usize {
        self.running
            .as_ref()
            .and_then(|r| r.merge.lock().ok().map(|m| m.len()))
            .unwrap_or(0)
    }

    /// Ends the partial lines of the running command (at a skip or at
    /// its end).
    pub(super) fn end_partial_lines(&mut self, err_style: Style) {
        let Some(mut r) = self.running.take() else {
            return;
        };
        let run = r.run;
        let out = self.ring_for(&r.session);
        r.out
            .finish(&mut |l| push_line(out, OutLine { run, line: l }));
        r.err.finish(&mut |mut l| {
            stderr_style(&mut l, err_style);
            push_line(out, OutLine { run, line: l });
        });
        self.running = Some(r);
    }

    /// Starts a run record without a real command (benchmarks, tests).
    pub fn begin_run(&mut self, command: &str, header: Style) -> u64 {
        self.runs += 1;
        self.skipped = 0;
        let run = self.runs;
        for (i, l) in command.lines().enumerate() {
            let p = if i == 0 { "$ " } else { "> " };
            push_line(
                &mut self.output,
                OutLine {
                    run,
                    line: StyledLine::plain(&format!("{p}{l}"), header),
                },
            );
        }
        self.running = Some(Running {
            run,
            session: self.output_session.clone(),
            command: command.to_string(),
            call_id: String::new(),
            started: Instant::now(),
            cancel: CancellationToken::new(),
            out: AnsiParser::new(),
            err: AnsiParser::new(),
            merge: Arc::new(Mutex::new(OutputMerge::new(self.frame_bytes))),
            woken: Arc::new(AtomicBool::new(false)),
            deferred: false,
            stopping: false,
        });
        run
    }

    /// The output ring of `session`: the shown one or a parked one.
    pub(super) fn ring_for(&mut self, session: &str) -> &mut Ring<OutLine> {
        if session == self.output_session {
            return &mut self.output;
        }
        let (cap, bytes) = (self.output.capacity(), self.budget_bytes);
        self.parked
            .entry(session.to_string())
            .or_insert_with(|| Ring::with_budget(cap, bytes))
    }

    /// Shows the output of `session`, setting the shown one aside.
    pub(super) fn show_session(&mut self, session: &str) {
        if session == self.output_session {
            return;
        }
        let (cap, bytes) = (self.output.capacity(), self.budget_bytes);
        let next = self
            .parked
            .remove(session)
            .unwrap_or_else(|| Ring::with_budget(cap, bytes));
        let old = std::mem::replace(&mut self.output, next);
        let old_session = std::mem::replace(&mut self.output_session, session.to_string());
        if !old.is_empty() {
            self.parked.insert(old_session, old);
        }
        self.follow = true;
        self.back = 0;
    }

    pub(super) fn push_status(&mut self, session: &str, run: u64, text_: String, style: Style) {
        let line = StyledLine::plain(&text_, style);
        push_line(self.ring_for(session), OutLine { run, line });
    }

    pub(super) fn last_output(&self) -> String {
        let last = self.output.iter().last().map(|l| l.run);
        self.output
            .iter()
            .filter(|l| Some(l.run) == last)
            .map(|l| l.line.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(super) fn render_output(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        let area = crate::tui::widgets::search::bar(f, area, &self.search, t.accent);
        self.out_height = area.height as usize;
        if self.output.is_empty() {
            let msg = if cx.can("command.run") {
                format!("commands run with the Bash tool in session {}", cx.session)
            } else {
                "read-only mode: commands cannot run".to_string()
            };
            placeholder(f, area, &msg, t.muted);
            return;
        }
        let shown = &self.output_session;
        let partial: Option<StyledLine> = self
            .running
            .as_ref()
            .filter(|r| &r.session == shown)
            .and_then(|r| {
                let p = r.out.partial();
                (!p.text.is_empty()).then(|| p.clone())
            });
        let total = self.output.len() + usize::from(partial.is_some());
        let h = area.height as usize;
        let max_back = total.saturating_sub(h);
        if self.follow {
            self.back = 0;
        }
        self.back = self.back.min(max_back);
        let end = total - self.back;
        let start = end.saturating_sub(h);
        let buf = f.buffer_mut();
        for (row, i) in (start..end).enumerate() {
            let y = area.y + row as u16;
            let line = if i < self.output.len() {
                self.output.get(i).map(|l| &l.line)
            } else {
                partial.as_ref()
            };
            if let Some(l) = line {
                buf.set_line(area.x, y, &l.to_line(t.base), area.width);
                let r = Rect::new(area.x, y, area.width, 1);
                self.mark_row(buf, i, &l.text, r, t);
            }
        }
    }
}

/// How much of the run's waiting output [`CommandPane::pull`] handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pull {
    /// Slices until the instant passes; the rest waits for the next
    /// frame (the render path).
    Until(Instant),
    /// All of it (at most `output_frame_bytes`): the command ended.
    All,
    /// Only the newest this-many bytes, the older counted as skipped:
    /// the user stopped the command (Ctrl-C, Ctrl-X), so its status line
    /// must not wait behind parsing output nobody asked to see.
    Tail(usize),
}

/// Bytes of output parsed between two looks at a frame's deadline.
pub const PULL_SLICE: usize = 16 << 10;

/// Time a frame spends parsing command output at most (plus one
/// [`PULL_SLICE`]) unless the loop says otherwise
/// ([`crate::tui::pane::Ctx::output_time`]); the rest is deferred to the
/// next frame. Small enough that a key pressed during a flood is answered
/// within the frame.
pub const PULL_FRAME_TIME: std::time::Duration = crate::tui::pane::OUTPUT_FRAME_TIME;

/// Newest output shown after the user stopped a command ([`Pull::Tail`]):
/// a few screens, parsed in a few milliseconds even in a debug build.
pub const STOPPED_TAIL_BYTES: usize = 32 << 10;

/// Cuts `chunks` (oldest first) to their newest `keep` bytes; returns the
/// bytes cut.
fn cut_to_tail(chunks: &mut Vec<OutputChunk>, keep: usize) -> u64 {
    let total: usize = chunks.iter().map(|c| c.data.len()).sum();
    let mut over = total.saturating_sub(keep);
    let cut = over as u64;
    while over > 0 && !chunks.is_empty() {
        let n = chunks[0].data.len();
        if n <= over {
            chunks.remove(0);
            over -= n;
        } else {
            chunks[0].data = chunks[0].data.slice(over..);
            over = 0;
        }
    }
    cut
}

/// Pushes `l` into `ring`, weighed by its heap bytes and its own size.
pub(super) fn push_line(ring: &mut Ring<OutLine>, l: OutLine) {
    let size = l.line.heap_bytes() + std::mem::size_of::<OutLine>();
    ring.push_sized(l, size, drop);
}

/// An exit status, with the signal named when it is 128 + a signal
/// number (`143 (SIGTERM)`): a process killed from outside (not by
/// wsbench's timeout, which says so itself).
pub fn exit_label(code: i32) -> String {
    if code > 128
        && let Ok(sig) = nix::sys::signal::Signal::try_from(code - 128)
    {
        return format!("{code} ({sig})");
    }
    code.to_string()
}

/// Stderr lines get the warning colour where the program set none.
pub(super) fn stderr_style(l: &mut StyledLine, style: Style) {
    if l.runs.first().is_none_or(|r| r.0 > 0) {
        l.runs.insert(0, (0, style));
    }
    for r in &mut l.runs {
        if r.1.fg.is_none() {
            r.1.fg = style.fg;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::config::TuiConfig;

    #[test]
    fn output_memory_is_bounded() {
        let cfg = TuiConfig {
            output_buffer_lines: 100,
            ..Default::default()
        };
        let mut p = CommandPane::new(&cfg);
        p.begin_run("seq", Style::default());
        for i in 0..10_000 {
            p.feed(
                StreamKind::Stdout,
                format!("{i}\n").as_bytes(),
                Style::default(),
            );
        }
        assert_eq!(p.output().len(), 100);
        assert_eq!(p.output().iter().last().unwrap().line.text, "9999");
    }

    /// Issue 16: 100 MB through the Command pane's real path (the run's
    /// merge, taken once a frame) stays within the byte budget, the
    /// newest output is shown, and what no frame could take is named.
    #[test]
    fn a_hundred_megabytes_stay_within_the_byte_budget() {
        let cfg = TuiConfig {
            output_buffer_bytes: 1 << 20,
            output_frame_bytes: 256 << 10,
            ..Default::default()
        };
        let mut p = CommandPane::new(&cfg);
        p.begin_run("yes", Style::default());
        let merge = p.running.as_ref().unwrap().merge.clone();
        let chunk = bytes::Bytes::from("y\n".repeat(32 * 1024)); // 64 KiB
        let (mut fed, mut frames) = (0usize, 0);
        let mut last = bytes::Bytes::new();
        while fed < 100 << 20 {
            // 8 reads arrive per frame: 512 KiB, twice what a frame takes.
            for _ in 0..8 {
                last = if fed + chunk.len() >= 100 << 20 {
                    bytes::Bytes::from("y\n".repeat(32 * 1024 - 1) + "end\n")
                } else {
                    chunk.clone()
                };
                fed += last.len();
                merge.lock().unwrap().push(StreamKind::Stdout, last.clone());
            }
            p.pull(Style::default(), Style::default(), Pull::All);
            frames += 1;
            assert!(
                p.output().bytes() <= 1 << 20,
                "frame {frames}: {}",
                p.output().bytes()
            );
        }
        assert!(fed >= 100 << 20);
        let texts: Vec<&str> = p.output().iter().map(|l| l.line.text.as_str()).collect();
        assert_eq!(texts.last(), Some(&"end"), "the newest output is shown");
        assert!(
            p.skipped() > 50 << 20,
            "the skip is counted: {}",
            p.skipped()
        );
        assert!(p.output().bytes() > (1 << 20) / 2, "the budget is used");
        let _ = last;
    }

    /// A source that always has output (the merge refilled before every
    /// frame) never makes a frame parse past its deadline: with the
    /// deadline already passed, one slice is parsed and the rest waits in
    /// the merge, first in line, counted nowhere as lost; the pane asks
    /// for the next frame until it has caught up.
    #[test]
    fn a_frame_out_of_time_parses_one_slice_and_defers_the_rest() {
        // A ring that holds every line, so the count shows nothing lost.
        let cfg = TuiConfig {
            output_frame_bytes: 256 << 10,
            output_buffer_lines: 1 << 20,
            output_buffer_bytes: 64 << 20,
            ..Default::default()
        };
        let mut p = CommandPane::new(&cfg);
        p.begin_run("yes", Style::default());
        let merge = p.running.as_ref().unwrap().merge.clone();
        let frame = bytes::Bytes::from("y\n".repeat(64 << 10)); // 128 KiB
        merge
            .lock()
            .unwrap()
            .push(StreamKind::Stdout, frame.clone());
        let past = Instant::now();
        p.pull(Style::default(), Style::default(), Pull::Until(past));
        assert_eq!(p.waiting_output(), frame.len() - PULL_SLICE);
        assert!(p.has_deferred_output(), "the next frame is asked for");
        assert_eq!(p.skipped(), 0, "nothing is lost");
        let shown = p.output().len();
        assert_eq!(shown, 1 + PULL_SLICE / 2, "the command line and one slice");

        // New output arrives behind the deferred bytes; each frame takes
        // the oldest first, and a frame with time catches up.
        merge
            .lock()
            .unwrap()
            .push(StreamKind::Stdout, bytes::Bytes::from("end\n"));
        p.pull(Style::default(), Style::default(), Pull::Until(past));
        assert_eq!(p.waiting_output(), frame.len() - 2 * PULL_SLICE + 4);
        let later = Instant::now() + std::time::Duration::from_secs(60);
        p.pull(Style::default(), Style::default(), Pull::Until(later));
        assert_eq!(p.waiting_output(), 0);
        assert!(!p.has_deferred_output());
        assert_eq!(p.skipped(), 0);
        let last = p.output().iter().last().unwrap();
        assert_eq!(last.line.text, "end");
        assert_eq!(p.output().len(), 1 + frame.len() / 2 + 1);
    }

    /// After Ctrl-C or Ctrl-X the end parses only the newest bytes; the
    /// older ones are counted and named, and the newest line is shown.
    #[test]
    fn a_stopped_command_ends_on_its_newest_output() {
        let mut p = CommandPane::new(&TuiConfig::default());
        p.begin_run("yes", Style::default());
        let merge = p.running.as_ref().unwrap().merge.clone();
        let body = "y\n".repeat(100 << 10);
        merge.lock().unwrap().push(
            StreamKind::Stdout,
            bytes::Bytes::from(body.clone() + "last\n"),
        );
        p.pull(Style::default(), Style::default(), Pull::Tail(1024));
        assert_eq!(p.skipped(), (body.len() + 5 - 1024) as u64);
        let texts: Vec<&str> = p.output().iter().map(|l| l.line.text.as_str()).collect();
        assert!(
            texts[1].starts_with("… "),
            "the skip is named: {:?}",
            texts[1]
        );
        assert_eq!(texts.last(), Some(&"last"));
        assert!(p.output().len() < 1024, "only the tail was parsed");
    }

    #[test]
    fn signal_exits_are_named() {
        assert_eq!(exit_label(143), "143 (SIGTERM)");
        assert_eq!(exit_label(137), "137 (SIGKILL)");
        assert_eq!(exit_label(3), "3");
        assert_eq!(exit_label(128), "128");
    }

    #[test]
    fn stderr_gets_the_warning_colour_only_where_unset() {
        let mut l = StyledLine::plain("x", Style::default());
        stderr_style(&mut l, Style::default().fg(ratatui::style::Color::Yellow));
        assert_eq!(l.runs[0].1.fg, Some(ratatui::style::Color::Yellow));
    }
}
