//! Command output as styled lines: SGR colours are kept, every other
//! escape or control sequence is swallowed (C24).
//!
//! The parsing is `vte`'s (alacritty's streaming parser for the DEC/xterm
//! state machine: ground, escape, CSI, OSC, DCS and SOS/PM/APC strings);
//! this module only maps its callbacks to styled lines. Only printable
//! characters ever reach a [`StyledLine`]; cursor moves, screen clears,
//! alternate-screen switches, window titles and OSC 52 clipboard writes
//! are parsed and dropped, so a command cannot draw outside its pane or
//! talk to the terminal. Bytes may arrive cut anywhere (inside a UTF-8
//! character or an escape sequence); the state carries over.
//!
//! Memory stays bounded: a line longer than [`MAX_LINE_BYTES`] is broken.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use super::text;

/// Longest line kept, in bytes of text; longer output is broken into
/// several lines so a command printing no newline cannot grow one line
/// without bound.
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// Tab stops of command output, as terminals set them.
const TAB_STOP: usize = 8;

/// One line of output: the text plus where each style starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StyledLine {
    /// The printable text (no control characters).
    pub text: String,
    /// `(byte offset, style)` runs in increasing offset order; text before
    /// the first run has the default style.
    pub runs: Vec<(u32, Style)>,
}

impl StyledLine {
    /// A line of plain text with one style (control characters are made
    /// visible, see [`text::display`]).
    pub fn plain(s: &str, style: Style) -> Self {
        let t = text::display(s).into_owned();
        let runs = if style == Style::default() {
            Vec::new()
        } else {
            vec![(0, style)]
        };
        StyledLine { text: t, runs }
    }

    /// A ratatui line whose styles are patched over `base`.
    pub fn to_line(&self, base: Style) -> Line<'_> {
        if self.runs.is_empty() {
            return Line::from(Span::styled(self.text.as_str(), base));
        }
        let mut spans = Vec::with_capacity(self.runs.len() + 1);
        let first = self.runs[0].0 as usize;
        if first > 0 {
            spans.push(Span::styled(&self.text[..first], base));
        }
        for (i, (start, style)) in self.runs.iter().enumerate() {
            let end = self
                .runs
                .get(i + 1)
                .map(|r| r.0 as usize)
                .unwrap_or(self.text.len());
            let start = *start as usize;
            if end > start {
                spans.push(Span::styled(&self.text[start..end], base.patch(*style)));
            }
        }
        Line::from(spans)
    }

    /// Heap bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.runs.capacity() * std::mem::size_of::<(u32, Style)>()
    }

    fn push(&mut self, c: char, style: Style) {
        let cur = self.runs.last().map(|r| r.1).unwrap_or_default();
        if cur != style {
            let at = self.text.len() as u32;
            match self.runs.last_mut() {
                Some(last) if last.0 == at => last.1 = style,
                _ => self.runs.push((at, style)),
            }
        }
        self.text.push(c);
    }

    fn pop(&mut self) {
        if self.text.pop().is_some() {
            let len = self.text.len() as u32;
            while self.runs.last().is_some_and(|r| r.0 > len) {
                self.runs.pop();
            }
        }
    }

    fn clear(&mut self) {
        self.text.clear();
        self.runs.clear();
    }

    fn chars(&self) -> usize {
        self.text.chars().count()
    }
}

/// What the `vte` callbacks write into: the current style and line.
#[derive(Debug, Default)]
struct Sink {
    style: Style,
    line: StyledLine,
    /// A carriage return was seen and no newline yet.
    cr: bool,
}

impl Sink {
    fn newline(&mut self, emit: &mut impl FnMut(StyledLine)) {
        self.cr = false;
        emit(std::mem::take(&mut self.line));
    }

    /// A carriage return not followed by a newline starts the line over
    /// (progress bars redraw that way).
    fn take_cr(&mut self) {
        if self.cr {
            self.cr = false;
            self.line.clear();
        }
    }
}

/// The `vte::Perform` side for one `feed`: the sink plus where completed
/// lines go.
struct Performer<'a, F: FnMut(StyledLine)> {
    sink: &'a mut Sink,
    emit: &'a mut F,
}

impl<F: FnMut(StyledLine)> vte::Perform for Performer<'_, F> {
    fn print(&mut self, c: char) {
        // vte prints DEL and anything not C0/C1; keep only what draws.
        if text::is_control(c) {
            return;
        }
        let s = &mut *self.sink;
        s.take_cr();
        if s.line.text.len() >= MAX_LINE_BYTES {
            s.newline(self.emit);
        }
        s.line.push(c, s.style);
    }

    fn execute(&mut self, byte: u8) {
        let s = &mut *self.sink;
        match byte {
            b'\n' => s.newline(self.emit),
            b'\r' => s.cr = true,
            b'\t' => {
                s.take_cr();
                let n = TAB_STOP - s.line.chars() % TAB_STOP;
                for _ in 0..n {
                    s.line.push(' ', s.style);
                }
            }
            0x08 => s.line.pop(),
            // BEL, C1 controls and the rest: nothing reaches the terminal.
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &vte::Params, intermediates: &[u8], ignore: bool, c: char) {
        // Private (`?`, `>`) and overlong sequences are dropped; cursor
        // moves, erases and modes are dropped too (the pane is a log).
        if c == 'm' && intermediates.is_empty() && !ignore {
            self.sink.style = apply_sgr(self.sink.style, params);
        }
    }

    // ESC sequences, OSC (titles, OSC 52), DCS, SOS/PM/APC: the default
    // no-op callbacks of `vte::Perform` swallow them.
}

/// Streaming parser from raw output bytes to [`StyledLine`]s, on
/// `vte::Parser` (its default build bounds OSC strings at 1024 bytes and
/// parameters at 32, so hostile output cannot grow it).
#[derive(Default)]
pub struct AnsiParser {
    vt: vte::Parser,
    sink: Sink,
}

impl std::fmt::Debug for AnsiParser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnsiParser")
            .field("sink", &self.sink)
            .finish_non_exhaustive()
    }
}

impl AnsiParser {
    /// A parser in the ground state with the default style.
    pub fn new() -> Self {
        Self::default()
    }

    /// The line being written (no newline yet).
    pub fn partial(&self) -> &StyledLine {
        &self.sink.line
    }

    /// Feeds raw bytes; calls `emit` for every completed line. Bytes may
    /// be cut anywhere (inside a UTF-8 character or a sequence); invalid
    /// UTF-8 becomes U+FFFD.
    pub fn feed(&mut self, bytes: &[u8], emit: &mut impl FnMut(StyledLine)) {
        let mut p = Performer {
            sink: &mut self.sink,
            emit,
        };
        self.vt.advance(&mut p, bytes);
    }

    /// Ends the stream: a cut UTF-8 character becomes U+FFFD, an open
    /// sequence is dropped, and a pending partial line is emitted.
    pub fn finish(&mut self, emit: &mut impl FnMut(StyledLine)) {
        // CAN ends any sequence, and completes a pending partial UTF-8
        // character as U+FFFD; vte has no other way to flush.
        self.feed(b"\x18", emit);
        self.vt = vte::Parser::new();
        if !self.sink.line.text.is_empty() {
            emit(std::mem::take(&mut self.sink.line));
        }
        self.sink = Sink::default();
    }
}

fn basic(n: u16) -> Color {
    match n {
        0 => Color::Black,
        1 => Color::Red,
        2 => Color::Green,
        3 => Color::Yellow,
        4 => Color::Blue,
        5 => Color::Magenta,
        6 => Color::Cyan,
        _ => Color::Gray,
    }
}

fn bright(n: u16) -> Color {
    match n {
        0 => Color::DarkGray,
        1 => Color::LightRed,
        2 => Color::LightGreen,
        3 => Color::LightYellow,
        4 => Color::LightBlue,
        5 => Color::LightMagenta,
        6 => Color::LightCyan,
        _ => Color::White,
    }
}

/// Applies an SGR sequence's parameters (`1;31`, `38;5;208`,
/// `38:2::1:2:3`: each item is one parameter with its colon
/// sub-parameters).
fn apply_sgr(mut style: Style, params: &vte::Params) -> Style {
    let groups: Vec<&[u16]> = params.iter().collect();
    let groups: &[&[u16]] = if groups.is_empty() { &[&[0]] } else { &groups };
    let mut i = 0;
    while i < groups.len() {
        let g = groups[i];
        let n = g.first().copied().unwrap_or(0);
        match n {
            0 => style = Style::default(),
            1 => style = style.add_modifier(Modifier::BOLD),
            2 => style = style.add_modifier(Modifier::DIM),
            3 => style = style.add_modifier(Modifier::ITALIC),
            4 => style = style.add_modifier(Modifier::UNDERLINED),
            7 => style = style.add_modifier(Modifier::REVERSED),
            9 => style = style.add_modifier(Modifier::CROSSED_OUT),
            21 | 22 => style = style.remove_modifier(Modifier::BOLD | Modifier::DIM),
            23 => style = style.remove_modifier(Modifier::ITALIC),
            24 => style = style.remove_modifier(Modifier::UNDERLINED),
            27 => style = style.remove_modifier(Modifier::REVERSED),
            29 => style = style.remove_modifier(Modifier::CROSSED_OUT),
            30..=37 => style = style.fg(basic(n - 30)),
            39 => style.fg = None,
            40..=47 => style = style.bg(basic(n - 40)),
            49 => style.bg = None,
            90..=97 => style = style.fg(bright(n - 90)),
            100..=107 => style = style.bg(bright(n - 100)),
            38 | 48 => {
                let color = if g.len() > 1 {
                    // Colon form: 38:5:n or 38:2:[cs]:r:g:b in one group.
                    match &g[1..] {
                        [5, n, ..] => Some(Color::Indexed((*n).min(255) as u8)),
                        [2, .., r, g, b] => Some(Color::Rgb(*r as u8, *g as u8, *b as u8)),
                        _ => None,
                    }
                } else {
                    let rest: Vec<u16> = groups[i + 1..]
                        .iter()
                        .take(4)
                        .map(|p| p.first().copied().unwrap_or(0))
                        .collect();
                    match rest.as_slice() {
                        [5, n, ..] => {
                            i += 2;
                            Some(Color::Indexed((*n).min(255) as u8))
                        }
                        [2, r, g, b] => {
                            i += 4;
                            Some(Color::Rgb(*r as u8, *g as u8, *b as u8))
                        }
                        _ => {
                            i = groups.len();
                            None
                        }
                    }
                };
                if let Some(c) = color {
                    style = if n == 38 { style.fg(c) } else { style.bg(c) };
                }
            }
            // Blink, conceal and fonts are ignored: concealed text would
            // hide output from the person reading it.
            _ => {}
        }
        i += 1;
    }
    style
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<StyledLine> {
        let mut p = AnsiParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut |l| out.push(l));
        }
        p.finish(&mut |l| out.push(l));
        out
    }

    fn texts(lines: &[StyledLine]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn c24_only_sgr_survives() {
        let raw = b"before\n\x1b[2J\x1b[H\x1b[31mred\x1b[0m\n\x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1b[10;10Hmoved\n\x1b[?1049lafter\n";
        let lines = parse(&[raw]);
        assert_eq!(texts(&lines), ["before", "red", "moved", "after"]);
        assert_eq!(lines[1].runs, vec![(0, Style::default().fg(Color::Red))]);
        for l in &lines {
            assert!(!l.text.chars().any(text::is_control), "{l:?}");
        }
    }

    #[test]
    fn sequences_and_utf8_split_across_chunks() {
        let lines = parse(&[b"a\x1b[3", b"2mg\xc3", b"\xa9\x1b]0;ti", b"tle\x1b\\z\n"]);
        assert_eq!(texts(&lines), ["agéz"]);
        assert_eq!(lines[0].runs[0], (1, Style::default().fg(Color::Green)));
    }

    #[test]
    fn c1_controls_and_strings_are_swallowed() {
        // UTF-8 output: U+009B and friends are C1 controls vte executes
        // (dropped here); what follows them is plain text.
        let lines = parse(&["x\u{9b}31my\u{9d}z\u{85}w\u{7f}\n".as_bytes()]);
        assert_eq!(texts(&lines), ["x31myzw"]);
        let lines = parse(&[b"a\x1bPq#0;2;0;0;0\x1b\\b\x1b_apc\x1b\\c\x1b7d\x1b(Be\n"]);
        assert_eq!(texts(&lines), ["abcde"]);
    }

    #[test]
    fn open_sequences_stay_bounded_and_end_cleanly() {
        // An OSC string never terminated for a megabyte: vte keeps at most
        // 1024 bytes of it, and none of it is text.
        let mut big = b"a\x1b]0;".to_vec();
        big.extend(std::iter::repeat_n(b'x', 1 << 20));
        big.extend_from_slice(b"\x07b\n");
        assert_eq!(texts(&parse(&[&big])), ["ab"]);
        // A stream cut inside a UTF-8 character or a CSI sequence.
        assert_eq!(texts(&parse(&[b"a\xc3"])), ["a\u{fffd}"]);
        let mut p = AnsiParser::new();
        let mut out = Vec::new();
        p.feed(b"x\x1b[3", &mut |l| out.push(l));
        p.finish(&mut |l| out.push(l));
        p.feed(b"1y\n", &mut |l| out.push(l));
        assert_eq!(texts(&out), ["x", "1y"]);
        assert!(out[1].runs.is_empty(), "the style was reset: {:?}", out[1]);
    }

    #[test]
    fn carriage_return_and_backspace() {
        let lines = parse(&[b"10%\r50%\r100%\nok\r\nx\x08y\n"]);
        assert_eq!(texts(&lines), ["100%", "ok", "y"]);
    }

    #[test]
    fn extended_colours() {
        let l = &parse(&[b"\x1b[38;5;208mo\x1b[48;2;1;2;3mb\x1b[38:2::9:8:7mc\n"])[0];
        assert_eq!(l.runs[0].1.fg, Some(Color::Indexed(208)));
        assert_eq!(l.runs[1].1.bg, Some(Color::Rgb(1, 2, 3)));
        assert_eq!(l.runs[2].1.fg, Some(Color::Rgb(9, 8, 7)));
    }

    #[test]
    fn invalid_utf8_and_long_lines() {
        let lines = parse(&[b"a\xffb\n"]);
        assert_eq!(texts(&lines), ["a\u{fffd}b"]);
        let long = vec![b'x'; MAX_LINE_BYTES + 10];
        let lines = parse(&[&long]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text.len(), MAX_LINE_BYTES);
    }

    #[test]
    fn to_line_patches_base_style() {
        let l = &parse(&[b"a\x1b[1mb\n"])[0];
        let line = l.to_line(Style::default().fg(Color::White));
        assert_eq!(line.spans.len(), 2);
        assert_eq!(line.spans[1].style.fg, Some(Color::White));
        assert!(line.spans[1].style.add_modifier.contains(Modifier::BOLD));
    }
}
