//! Finding a command's end in the session shell's output streams.
//!
//! After each command the shell prints, on its saved stdout, `RS "WSB"
//! <nonce> " " <status> " " <pwd> US "\n"`, and on its saved stderr `RS
//! "WSB" <nonce> US` (RS = 0x1e, US = 0x1f; see [`super::script`]). The
//! nonce is fresh per command and never in the command's environment, so
//! a command cannot print its own end by accident. A [`Scanner`] passes
//! every byte before the token through and holds back only a tail that
//! could be the token's start (at most its length minus one byte).
//!
//! Limits: a directory name holding US (0x1f) cuts the reported cwd short;
//! bytes a background job prints after the end token are left in the pipe
//! and are shown as the start of the next command's output.

/// Most bytes kept after the token while waiting for its US (a `pwd`):
/// past this the trailer is cut, never grown further.
const MAX_TRAILER: usize = 64 * 1024;

/// The start of the end token of the command with `nonce`.
pub(crate) fn token(nonce: &str) -> Vec<u8> {
    let mut t = b"\x1eWSB".to_vec();
    t.extend_from_slice(nonce.as_bytes());
    t
}

/// Splits one stream into the command's bytes and its end trailer.
#[derive(Debug)]
pub(crate) struct Scanner {
    token: Vec<u8>,
    /// Bytes that may be the token's start, or the token and part of the
    /// trailer once found.
    held: Vec<u8>,
    found: bool,
    trailer: Option<Vec<u8>>,
}

impl Scanner {
    /// A scanner for the end token of `nonce`.
    pub(crate) fn new(nonce: &str) -> Self {
        Scanner {
            token: token(nonce),
            held: Vec::new(),
            found: false,
            trailer: None,
        }
    }

    /// The trailer (the bytes between the token and US) once the end was
    /// seen.
    pub(crate) fn trailer(&self) -> Option<&[u8]> {
        self.trailer.as_deref()
    }

    /// Feeds `data`; calls `emit` with the bytes that are the command's
    /// output. Bytes after the trailer's US are dropped (the `\n` the
    /// shell prints after it). Returns whether the end has been seen.
    pub(crate) fn feed(&mut self, data: &[u8], emit: &mut impl FnMut(&[u8])) -> bool {
        if self.trailer.is_some() {
            return true;
        }
        self.held.extend_from_slice(data);
        if !self.found {
            match find(&self.held, &self.token) {
                Some(at) => {
                    emit(&self.held[..at]);
                    self.held.drain(..at + self.token.len());
                    self.found = true;
                }
                None => {
                    let keep = partial_suffix(&self.held, &self.token);
                    let cut = self.held.len() - keep;
                    emit(&self.held[..cut]);
                    self.held.drain(..cut);
                    return false;
                }
            }
        }
        if let Some(us) = self.held.iter().position(|b| *b == 0x1f) {
            self.held.truncate(us);
            self.trailer = Some(std::mem::take(&mut self.held));
        } else if self.held.len() > MAX_TRAILER {
            self.held.truncate(MAX_TRAILER);
            self.trailer = Some(std::mem::take(&mut self.held));
        }
        self.trailer.is_some()
    }

    /// At end of file: the bytes still held back (a token start that
    /// never completed), which are output after all.
    pub(crate) fn flush(&mut self, emit: &mut impl FnMut(&[u8])) {
        if !self.found && !self.held.is_empty() {
            emit(&self.held);
            self.held.clear();
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Length of the longest suffix of `hay` that is a proper prefix of
/// `token`.
fn partial_suffix(hay: &[u8], token: &[u8]) -> usize {
    let max = (token.len() - 1).min(hay.len());
    (1..=max)
        .rev()
        .find(|n| hay[hay.len() - n..] == token[..*n])
        .unwrap_or(0)
}

/// The parsed stdout trailer: ` <status> <pwd>` (after the nonce).
pub(crate) fn parse_trailer(trailer: &[u8]) -> (Option<i32>, Option<String>) {
    let text = String::from_utf8_lossy(trailer);
    let text = text.strip_prefix(' ').unwrap_or(&text);
    let (status, pwd) = text.split_once(' ').unwrap_or((text, ""));
    let pwd = (!pwd.is_empty()).then(|| pwd.to_string());
    (status.trim().parse().ok(), pwd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> (Vec<u8>, Option<Vec<u8>>) {
        let mut s = Scanner::new("n1");
        let mut out = Vec::new();
        for c in chunks {
            s.feed(c, &mut |b| out.extend_from_slice(b));
        }
        (out, s.trailer().map(|t| t.to_vec()))
    }

    #[test]
    fn passes_output_and_finds_the_end_split_anywhere() {
        let whole: &[u8] = b"hello\x1eWX\x1eWSBn1 0 /tmp/a b\x1f\n";
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            let (out, trailer) = run(&[a, b]);
            assert_eq!(out, b"hello\x1eWX", "cut at {cut}");
            assert_eq!(
                trailer.as_deref(),
                Some(&b" 0 /tmp/a b"[..]),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn another_nonce_is_output() {
        let (out, trailer) = run(&[b"x\x1eWSBn2 0 /\x1f\n"]);
        assert_eq!(out, b"x\x1eWSBn2 0 /\x1f\n");
        assert!(trailer.is_none());
    }

    #[test]
    fn a_held_start_is_flushed_at_eof() {
        let mut s = Scanner::new("n1");
        let mut out = Vec::new();
        s.feed(b"ab\x1eWS", &mut |b| out.extend_from_slice(b));
        assert_eq!(out, b"ab");
        s.flush(&mut |b| out.extend_from_slice(b));
        assert_eq!(out, b"ab\x1eWS");
    }

    #[test]
    fn trailer_parses_status_and_pwd() {
        assert_eq!(
            parse_trailer(b" 3 /a b"),
            (Some(3), Some("/a b".to_string()))
        );
        assert_eq!(parse_trailer(b""), (None, None));
    }
}
