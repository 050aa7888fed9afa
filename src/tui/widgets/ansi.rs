//! Command output as styled lines: SGR colours are kept, every other
//! escape or control sequence is swallowed (C24).
//!
//! The parser is a streaming ECMA-48 state machine (the DEC/xterm shape:
//! ground, escape, CSI, OSC, DCS and SOS/PM/APC strings). Only printable
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

/// Longest parameter string of a CSI sequence kept (the rest is ignored).
const MAX_PARAMS: usize = 64;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Ground,
    Escape,
    EscapeIntermediate,
    Csi,
    CsiIgnore,
    /// OSC, DCS, SOS, PM, APC: swallowed until BEL or ST.
    String,
    /// ESC seen inside a string: `\` ends it.
    StringEscape,
}

/// Streaming parser from raw output bytes to [`StyledLine`]s.
#[derive(Debug)]
pub struct AnsiParser {
    state: State,
    style: Style,
    params: String,
    private: bool,
    line: StyledLine,
    cr: bool,
    utf8: Vec<u8>,
}

impl Default for AnsiParser {
    fn default() -> Self {
        Self::new()
    }
}

impl AnsiParser {
    /// A parser in the ground state with the default style.
    pub fn new() -> Self {
        AnsiParser {
            state: State::Ground,
            style: Style::default(),
            params: String::new(),
            private: false,
            line: StyledLine::default(),
            cr: false,
            utf8: Vec::new(),
        }
    }

    /// The line being written (no newline yet).
    pub fn partial(&self) -> &StyledLine {
        &self.line
    }

    /// Feeds raw bytes; calls `emit` for every completed line.
    pub fn feed(&mut self, bytes: &[u8], emit: &mut impl FnMut(StyledLine)) {
        let mut buf;
        let data: &[u8] = if self.utf8.is_empty() {
            bytes
        } else {
            buf = std::mem::take(&mut self.utf8);
            buf.extend_from_slice(bytes);
            &buf
        };
        let mut rest = data;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.feed_str(s, emit);
                    break;
                }
                Err(e) => {
                    let (ok, tail) = rest.split_at(e.valid_up_to());
                    // SAFETY-free: `ok` was just validated.
                    self.feed_str(std::str::from_utf8(ok).unwrap_or_default(), emit);
                    match e.error_len() {
                        Some(n) => {
                            self.feed_char('\u{fffd}', emit);
                            rest = &tail[n..];
                        }
                        None => {
                            self.utf8 = tail.to_vec();
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: a pending partial line is emitted.
    pub fn finish(&mut self, emit: &mut impl FnMut(StyledLine)) {
        if !self.utf8.is_empty() {
            self.utf8.clear();
            self.feed_char('\u{fffd}', emit);
        }
        if !self.line.text.is_empty() {
            emit(std::mem::take(&mut self.line));
        }
        self.state = State::Ground;
        self.style = Style::default();
    }

    fn feed_str(&mut self, s: &str, emit: &mut impl FnMut(StyledLine)) {
        for c in s.chars() {
            self.feed_char(c, emit);
        }
    }

    fn newline(&mut self, emit: &mut impl FnMut(StyledLine)) {
        self.cr = false;
        emit(std::mem::take(&mut self.line));
    }

    fn feed_char(&mut self, c: char, emit: &mut impl FnMut(StyledLine)) {
        // CAN and SUB abort any sequence; ESC starts a new one anywhere
        // except inside a string, where it may begin the terminator.
        match c {
            '\u{18}' | '\u{1a}' => {
                self.state = State::Ground;
                return;
            }
            '\u{1b}' if self.state == State::String => {
                self.state = State::StringEscape;
                return;
            }
            '\u{1b}' => {
                self.state = State::Escape;
                self.params.clear();
                self.private = false;
                return;
            }
            // 8-bit C1 introducers act like their 7-bit forms.
            '\u{9b}' => {
                self.state = State::Csi;
                self.params.clear();
                self.private = false;
                return;
            }
            '\u{90}' | '\u{9d}' | '\u{98}' | '\u{9e}' | '\u{9f}' => {
                self.state = State::String;
                return;
            }
            '\u{9c}' => {
                self.state = State::Ground;
                return;
            }
            _ => {}
        }
        match self.state {
            State::Ground => self.ground(c, emit),
            State::Escape => match c {
                '[' => self.state = State::Csi,
                ']' | 'P' | 'X' | '^' | '_' => self.state = State::String,
                '\u{20}'..='\u{2f}' => self.state = State::EscapeIntermediate,
                c if text::is_control(c) => {}
                _ => self.state = State::Ground,
            },
            State::EscapeIntermediate => match c {
                '\u{20}'..='\u{2f}' => {}
                c if text::is_control(c) => {}
                _ => self.state = State::Ground,
            },
            State::Csi => match c {
                '0'..='9' | ';' | ':' => {
                    if self.params.len() < MAX_PARAMS {
                        self.params.push(c);
                    } else {
                        self.state = State::CsiIgnore;
                    }
                }
                '<' | '=' | '>' | '?' => self.private = true,
                '\u{20}'..='\u{2f}' => self.private = true,
                '\u{40}'..='\u{7e}' => {
                    if c == 'm' && !self.private {
                        self.style = apply_sgr(self.style, &self.params);
                    }
                    self.state = State::Ground;
                }
                c if text::is_control(c) => {}
                _ => self.state = State::CsiIgnore,
            },
            State::CsiIgnore => {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    self.state = State::Ground;
                }
            }
            State::String => {
                if c == '\u{7}' {
                    self.state = State::Ground;
                }
            }
            State::StringEscape => {
                self.state = if c == '\\' {
                    State::Ground
                } else {
                    State::String
                };
            }
        }
    }

    fn ground(&mut self, c: char, emit: &mut impl FnMut(StyledLine)) {
        match c {
            '\n' => self.newline(emit),
            '\r' => self.cr = true,
            '\t' => {
                self.take_cr();
                let n = TAB_STOP - self.line.chars() % TAB_STOP;
                for _ in 0..n {
                    self.line.push(' ', self.style);
                }
            }
            '\u{8}' => self.line.pop(),
            c if text::is_control(c) => {}
            c => {
                self.take_cr();
                if self.line.text.len() >= MAX_LINE_BYTES {
                    self.newline(emit);
                }
                self.line.push(c, self.style);
            }
        }
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

/// Applies an SGR parameter string (`1;31`, `38;5;208`, `38:2::1:2:3`).
fn apply_sgr(mut style: Style, params: &str) -> Style {
    let groups: Vec<&str> = if params.is_empty() {
        vec!["0"]
    } else {
        params.split(';').collect()
    };
    let num = |s: &str| s.parse::<u16>().unwrap_or(0);
    let mut i = 0;
    while i < groups.len() {
        let g = groups[i];
        let n = num(g.split(':').next().unwrap_or(""));
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
                let color = if g.contains(':') {
                    // Colon form: 38:5:n or 38:2:[cs]:r:g:b in one group.
                    let sub: Vec<u16> = g.split(':').skip(1).map(num).collect();
                    match sub.as_slice() {
                        [5, n, ..] => Some(Color::Indexed((*n).min(255) as u8)),
                        [2, .., r, g, b] => Some(Color::Rgb(*r as u8, *g as u8, *b as u8)),
                        _ => None,
                    }
                } else {
                    let rest: Vec<u16> = groups[i + 1..].iter().take(4).map(|s| num(s)).collect();
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
        let lines = parse(&["x\u{9b}31my\u{9d}0;t\u{7}z\u{85}w\n".as_bytes()]);
        assert_eq!(texts(&lines), ["xyzw"]);
        let lines = parse(&[b"a\x1bPq#0;2;0;0;0\x1b\\b\x1b_apc\x1b\\c\x1b7d\x1b(Be\n"]);
        assert_eq!(texts(&lines), ["abcde"]);
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
