//! The `[tui]` section of the config file.
//!
//! [`TuiConfig`] is the `tui` field of the main [`Config`]: the file is
//! parsed once, and an unknown key or bad value here is reported like one
//! in any other section, naming the file, line, column and key.
//!
//! ```toml
//! [tui]
//! theme = "dark"            # dark | light | high-contrast | a user theme
//! mouse = true
//! log_buffer_lines = 10000  # Logs pane ring buffer
//! log_buffer_bytes = 4194304   # … and its budget in bytes (4 MiB)
//! output_buffer_lines = 10000  # Command pane ring buffer (per session)
//! output_buffer_bytes = 8388608  # … and its budget in bytes (8 MiB)
//! output_frame_bytes = 262144  # newest output taken per frame (256 KiB)
//! clipboard = "auto"        # auto | native | osc52 | off
//! start_in_prompt = false   # true: the keyboard starts in the Command prompt
//!
//! [tui.keys]                # action name = key or list of keys ([] unbinds)
//! "files.delete" = ["D", "delete"]
//! "app.quit" = "ctrl-q"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};

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
    /// Bytes of log lines kept by the Logs pane (text and bookkeeping);
    /// warn and error lines are kept before info, info before debug.
    pub log_buffer_bytes: usize,
    /// Lines of command output kept by the Command pane.
    pub output_buffer_lines: usize,
    /// Bytes of command output kept by the Command pane per session
    /// (also the agent pane's budget); a line without a newline is broken
    /// into lines of at most 16 KiB.
    pub output_buffer_bytes: usize,
    /// Newest bytes of a running command's output the Command pane takes
    /// per frame; older bytes that arrived in the same frame are skipped
    /// and counted (a terminal cannot show them either).
    pub output_frame_bytes: usize,
    /// Commands kept in the prompt history.
    pub prompt_history: usize,
    /// The Command pane runs commands in the session's long-lived shell,
    /// so `cd` and `export` carry over (on by default); off gives every
    /// command a fresh shell, as the Bash tool's default.
    pub command_session_shell: bool,
    /// Start with the keyboard in the Command prompt (as before issue
    /// 22) instead of on the Files list. Off by default: keys pressed to
    /// move (`j`, `k`, `g`) must not become shell commands; `i` reaches the
    /// prompt from anywhere.
    pub start_in_prompt: bool,
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
            log_buffer_bytes: 4 << 20,
            output_buffer_lines: 10_000,
            output_buffer_bytes: 8 << 20,
            output_frame_bytes: 256 << 10,
            prompt_history: 500,
            command_session_shell: true,
            start_in_prompt: false,
            clipboard: ClipboardMode::Auto,
            osc52_max_bytes: 100_000,
            max_fps: 60,
            layout: LayoutConfig::default(),
            keys: BTreeMap::new(),
        }
    }
}

impl TuiConfig {
    /// Parses the `[tui]` section of a whole config file's text, checking
    /// every other section too (it is one [`Config`]). Errors read
    /// `line:column: message`, the message naming the key.
    pub fn parse(text: &str) -> Result<TuiConfig, String> {
        match Config::parse(text, Path::new("")) {
            Ok(c) => Ok(c.tui),
            Err(ConfigError::Parse {
                line,
                column,
                message,
                ..
            }) => Err(format!("{line}:{column}: {message}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Brings values the TUI cannot honour into range: ring buffers keep at
    /// least 100 lines and 64 KiB, a frame takes at least 4 KiB, the frame
    /// rate stays within 1..=240.
    pub fn normalize(&mut self) {
        self.log_buffer_lines = self.log_buffer_lines.max(100);
        self.output_buffer_lines = self.output_buffer_lines.max(100);
        self.log_buffer_bytes = self.log_buffer_bytes.max(64 << 10);
        self.output_buffer_bytes = self.output_buffer_bytes.max(64 << 10);
        self.output_frame_bytes = self.output_frame_bytes.max(4 << 10);
        self.max_fps = self.max_fps.clamp(1, 240);
    }

    /// Key overrides as lists.
    pub fn key_overrides(&self) -> BTreeMap<String, Vec<String>> {
        self.keys
            .iter()
            .map(|(k, v)| (k.clone(), v.to_vec()))
            .collect()
    }
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
        let e = TuiConfig::parse("[tui]\nlog_buffer_lines = \"many\"\n").unwrap_err();
        assert!(e.starts_with("2:"), "{e}");
        assert!(e.contains("log_buffer_lines"), "{e}");
    }

    #[test]
    fn the_main_config_owns_the_section() {
        let p = Path::new("/cfg/config.toml");
        let c = Config::parse(
            "[tui]\nmouse = false\nlog_buffer_lines = 3\n[tui.keys]\n\"app.quit\" = \"x\"\n[tui.layout]\nleft = 40\n",
            p,
        )
        .unwrap();
        assert!(!c.tui.mouse);
        assert_eq!(c.tui.log_buffer_lines, 100, "clamped");
        assert_eq!(c.tui.layout.left, 40);
        assert_eq!(c.tui.key_overrides()["app.quit"], ["x"]);
        assert_eq!(Config::default().tui, TuiConfig::default());
        // One parse: a [tui] typo is placed like any other section's.
        let e = Config::parse(
            "[limits]\nread_max_lines = 10\n\n[tui.layout]\nlft = 3\n",
            p,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("/cfg/config.toml:5:1: "), "{e}");
        assert!(e.contains("unknown field `lft`"), "{e}");
        let e = Config::parse("[tui]\nmax_fps = \"fast\"\n", p)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/cfg/config.toml:2:"), "{e}");
        assert!(e.contains("max_fps"), "{e}");
    }
}
