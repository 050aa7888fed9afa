//! The `[tui]` section of the config file.
//!
//! Read from the same TOML file as the rest of the configuration; other
//! sections are left to their owners. [`TuiConfig`] derives `Deserialize`
//! with `deny_unknown_fields`, so the main config can later embed it as a
//! field. Errors name the file, line and key and are shown in the TUI
//! (a toast and the Logs pane) instead of being ignored.
//!
//! ```toml
//! [tui]
//! theme = "dark"            # dark | light | high-contrast | a user theme
//! mouse = true
//! log_buffer_lines = 10000  # Logs pane ring buffer
//! output_buffer_lines = 10000  # Command pane ring buffer
//! clipboard = "auto"        # auto | native | osc52 | off
//!
//! [tui.keys]                # action name = key or list of keys ([] unbinds)
//! "files.delete" = ["D", "delete"]
//! "app.quit" = "ctrl-q"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where copied text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClipboardMode {
    /// A native tool (wl-copy, xclip, xsel, pbcopy), else OSC 52.
    #[default]
    Auto,
    /// Native tools only.
    Native,
    /// OSC 52 only (works over SSH and in tmux with `set-clipboard on`).
    Osc52,
    /// Copying is disabled.
    Off,
}

/// A key or a list of keys in `[tui.keys]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KeyList {
    /// One key.
    One(String),
    /// Several keys (empty = unbound).
    Many(Vec<String>),
}

impl KeyList {
    /// The keys as a list.
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            KeyList::One(k) => vec![k.clone()],
            KeyList::Many(v) => v.clone(),
        }
    }
}

/// Settings of the TUI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuiConfig {
    /// Theme name (`--theme` wins).
    pub theme: Option<String>,
    /// Capture the mouse (`--no-mouse` turns it off).
    pub mouse: bool,
    /// Lines kept by the Logs pane.
    pub log_buffer_lines: usize,
    /// Lines of command output kept by the Command pane.
    pub output_buffer_lines: usize,
    /// Commands kept in the prompt history.
    pub prompt_history: usize,
    /// Where copies go.
    pub clipboard: ClipboardMode,
    /// Largest text sent through OSC 52, in bytes (terminals cap it).
    pub osc52_max_bytes: usize,
    /// Frames per second at most.
    pub max_fps: u32,
    /// Split ratios in percent: left column width, Sessions/Skills/Offload
    /// heights inside it, Files height on the right.
    pub layout: LayoutConfig,
    /// Key overrides by action name.
    pub keys: BTreeMap<String, KeyList>,
}

/// Initial split ratios, in percent (changed at run time with the resize
/// keys or by dragging a border).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LayoutConfig {
    /// Width of the left column.
    pub left: u16,
    /// Height of the Files pane in the right column.
    pub files: u16,
    /// Height of the Command pane in what is left under Files.
    pub command: u16,
}

impl Default for LayoutConfig {
    fn default() -> Self {
        LayoutConfig {
            left: 30,
            files: 45,
            command: 65,
        }
    }
}

impl Default for TuiConfig {
    fn default() -> Self {
        TuiConfig {
            theme: None,
            mouse: true,
            log_buffer_lines: 10_000,
            output_buffer_lines: 10_000,
            prompt_history: 500,
            clipboard: ClipboardMode::Auto,
            osc52_max_bytes: 100_000,
            max_fps: 60,
            layout: LayoutConfig::default(),
            keys: BTreeMap::new(),
        }
    }
}

#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    tui: Option<TuiConfig>,
    #[serde(flatten)]
    _rest: toml::Table,
}

impl TuiConfig {
    /// Reads the `[tui]` section of `path`. A missing file or section gives
    /// the defaults; a bad section gives the defaults plus an error message
    /// naming `file:line:column` and the key.
    pub fn load(path: &Path) -> (TuiConfig, Option<String>) {
        match std::fs::read_to_string(path) {
            Ok(text) => match Self::parse(&text) {
                Ok(c) => (c, None),
                Err(e) => (
                    TuiConfig::default(),
                    Some(format!("{}:{e}", path.display())),
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (TuiConfig::default(), None),
            Err(e) => (
                TuiConfig::default(),
                Some(format!("cannot read {}: {e}", path.display())),
            ),
        }
    }

    /// Parses the `[tui]` section out of a whole config file's text.
    /// Errors read `line:column: message`.
    pub fn parse(text: &str) -> Result<TuiConfig, String> {
        let whole: Whole = toml::from_str(text).map_err(|e| {
            let (line, col) = e
                .span()
                .map(|s| crate::config::line_col(text, s.start))
                .unwrap_or((1, 1));
            format!("{line}:{col}: {}", e.message())
        })?;
        let mut c = whole.tui.unwrap_or_default();
        c.log_buffer_lines = c.log_buffer_lines.max(100);
        c.output_buffer_lines = c.output_buffer_lines.max(100);
        c.max_fps = c.max_fps.clamp(1, 240);
        Ok(c)
    }

    /// Key overrides as lists.
    pub fn key_overrides(&self) -> BTreeMap<String, Vec<String>> {
        self.keys
            .iter()
            .map(|(k, v)| (k.clone(), v.to_vec()))
            .collect()
    }
}

/// Blanks the `[tui]` tables of a config file's text, keeping every other
/// line where it was, so a config parser that does not know `[tui]` yet
/// still reports the right line numbers for its own sections.
pub fn strip_tui_section(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tui = false;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') {
            let header = t
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap_or("")
                .trim()
                .trim_matches('"');
            in_tui = header == "tui" || header.starts_with("tui.");
        }
        if in_tui {
            if line.ends_with('\n') {
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_sections_are_tolerated() {
        let c = TuiConfig::parse(
            "[limits]\nbash_max_output_chars = 5\n[tui]\nmouse = false\ntheme = \"light\"\n[tui.keys]\n\"app.quit\" = \"x\"\n\"files.delete\" = [\"D\", \"delete\"]\n",
        )
        .unwrap();
        assert!(!c.mouse);
        assert_eq!(c.theme.as_deref(), Some("light"));
        assert_eq!(c.key_overrides()["files.delete"], ["D", "delete"]);
        assert_eq!(TuiConfig::parse("").unwrap(), TuiConfig::default());
    }

    #[test]
    fn errors_name_line_and_key() {
        let e = TuiConfig::parse("[workspace]\n\n[tui]\nmouse = true\nmose = 1\n").unwrap_err();
        assert!(e.starts_with("5:"), "{e}");
        assert!(e.contains("mose"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, "[tui]\nlog_buffer_lines = \"many\"\n").unwrap();
        let (c, err) = TuiConfig::load(&p);
        assert_eq!(c, TuiConfig::default());
        let err = err.unwrap();
        assert!(err.contains("c.toml:2:"), "{err}");
    }

    #[test]
    fn stripping_keeps_line_numbers() {
        let text =
            "[workspace]\na = 1\n[tui]\nmouse = false\n[tui.keys]\nx = \"y\"\n[limits]\nb = 2\n";
        let s = strip_tui_section(text);
        assert_eq!(s, "[workspace]\na = 1\n\n\n\n\n[limits]\nb = 2\n");
        assert_eq!(s.lines().count(), text.lines().count());
    }
}
