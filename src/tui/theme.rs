//! Themes: semantic styles loaded from `themes/*.toml`.
//!
//! The built-in themes (`dark`, `light`, `high-contrast`) are embedded with
//! `include_str!`, so the binary needs no files; a user may add more as
//! `$XDG_CONFIG_HOME/wsbench/themes/<name>.toml`. A theme file names colours
//! for semantic roles (`[colors]`, see `themes/dark.toml` for every key)
//! and optionally extra modifiers (`[modifiers]`); a missing key falls back
//! to the dark theme's value, an unknown key or a bad colour is an error
//! naming the file and key. With `NO_COLOR` set (any non-empty value,
//! <https://no-color.org>) every colour is dropped and roles are told apart
//! by bold, underline and reverse video only.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// The built-in themes: `(name, TOML text)`.
pub const BUILTIN: [(&str, &str); 3] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// Name of the theme used when none is chosen.
pub const DEFAULT_THEME: &str = "dark";

/// Errors loading a theme.
#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    /// No built-in or user theme has this name.
    #[error("unknown theme `{name}` (available: {available})")]
    Unknown {
        /// Name asked for.
        name: String,
        /// Comma-separated names that exist.
        available: String,
    },
    /// The theme file is not valid.
    #[error("theme {source_name}: {message}")]
    Invalid {
        /// File or built-in name.
        source_name: String,
        /// What is wrong (names the key).
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    #[allow(dead_code)]
    name: Option<String>,
    #[serde(default)]
    colors: BTreeMap<String, String>,
    #[serde(default)]
    modifiers: BTreeMap<String, String>,
}

/// Every style the TUI draws with, by role.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// Theme name.
    pub name: String,
    /// Normal text.
    pub base: Style,
    /// Secondary text (sizes, times, hints).
    pub muted: Style,
    /// Emphasis (counts, the selected session).
    pub accent: Style,
    /// Border of an unfocused pane.
    pub border: Style,
    /// Border of the focused pane.
    pub border_focused: Style,
    /// Title of an unfocused pane.
    pub title: Style,
    /// Title of the focused pane.
    pub title_focused: Style,
    /// The selected row.
    pub selection: Style,
    /// The header bar.
    pub header: Style,
    /// The footer bar.
    pub footer: Style,
    /// A key name in hints and help.
    pub key: Style,
    /// Errors.
    pub error: Style,
    /// Warnings.
    pub warn: Style,
    /// Information.
    pub info: Style,
    /// Debug output.
    pub debug: Style,
    /// Success (exit code 0, valid skill).
    pub success: Style,
    /// Directories in the file tree.
    pub dir: Style,
    /// Symbolic links.
    pub symlink: Style,
    /// Binary files.
    pub binary: Style,
    /// Line numbers of a preview or editor.
    pub line_number: Style,
    /// Search matches.
    pub matched: Style,
    /// `workspace:///` links.
    pub link: Style,
}

const ROLES: [&str; 28] = [
    "fg",
    "bg",
    "muted",
    "accent",
    "border",
    "border_focused",
    "title",
    "title_focused",
    "selection_fg",
    "selection_bg",
    "header_fg",
    "header_bg",
    "footer_fg",
    "footer_bg",
    "key",
    "error",
    "warn",
    "info",
    "debug",
    "success",
    "dir",
    "symlink",
    "binary",
    "line_number",
    "match_fg",
    "match_bg",
    "link",
    "selection",
];

impl Default for Theme {
    fn default() -> Self {
        Theme::builtin(DEFAULT_THEME).expect("the dark theme is valid")
    }
}

fn parse_modifiers(text: &str) -> Result<Modifier, String> {
    let mut m = Modifier::empty();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        m |= match part {
            "bold" => Modifier::BOLD,
            "dim" => Modifier::DIM,
            "italic" => Modifier::ITALIC,
            "underlined" | "underline" => Modifier::UNDERLINED,
            "reversed" | "reverse" => Modifier::REVERSED,
            "crossed_out" => Modifier::CROSSED_OUT,
            other => return Err(format!("unknown modifier `{other}`")),
        };
    }
    Ok(m)
}

impl Theme {
    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Result<Theme, ThemeError> {
        let (n, text) =
            BUILTIN
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| ThemeError::Unknown {
                    name: name.to_string(),
                    available: BUILTIN.map(|b| b.0).join(", "),
                })?;
        Theme::parse(n, text, n)
    }

    /// Names of the built-in themes plus the user's (`<dir>/*.toml`).
    pub fn available(user_dir: Option<&Path>) -> Vec<String> {
        let mut names: Vec<String> = BUILTIN.iter().map(|b| b.0.to_string()).collect();
        if let Some(dir) = user_dir
            && let Ok(rd) = std::fs::read_dir(dir)
        {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "toml")
                    && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
                    && !names.iter().any(|n| n == stem)
                {
                    names.push(stem.to_string());
                }
            }
        }
        names.sort();
        names
    }

    /// Loads `name`: a user theme in `user_dir` wins over a built-in one.
    pub fn load(name: &str, user_dir: Option<&Path>) -> Result<Theme, ThemeError> {
        if let Some(dir) = user_dir {
            let p = dir.join(format!("{name}.toml"));
            if let Ok(text) = std::fs::read_to_string(&p) {
                return Theme::parse(name, &text, &p.display().to_string());
            }
        }
        match Theme::builtin(name) {
            Err(ThemeError::Unknown { name, .. }) => Err(ThemeError::Unknown {
                name,
                available: Theme::available(user_dir).join(", "),
            }),
            other => other,
        }
    }

    /// Parses theme TOML; `source_name` names it in errors. Missing roles
    /// fall back to the dark theme's colours.
    pub fn parse(name: &str, text: &str, source_name: &str) -> Result<Theme, ThemeError> {
        let invalid = |message: String| ThemeError::Invalid {
            source_name: source_name.to_string(),
            message,
        };
        let file: ThemeFile = toml::from_str(text).map_err(|e| invalid(e.message().to_string()))?;
        let defaults: ThemeFile = if name == DEFAULT_THEME && source_name == DEFAULT_THEME {
            ThemeFile {
                name: None,
                colors: BTreeMap::new(),
                modifiers: BTreeMap::new(),
            }
        } else {
            toml::from_str(BUILTIN[0].1).map_err(|e| invalid(e.message().to_string()))?
        };
        for key in file.colors.keys() {
            if !ROLES.contains(&key.as_str()) || key == "selection" {
                return Err(invalid(format!("unknown colour role `{key}`")));
            }
        }
        for key in file.modifiers.keys() {
            if !ROLES.contains(&key.as_str()) {
                return Err(invalid(format!("unknown modifier role `{key}`")));
            }
        }
        let color = |key: &str| -> Result<Color, ThemeError> {
            let v = file
                .colors
                .get(key)
                .or_else(|| defaults.colors.get(key))
                .map(String::as_str)
                .unwrap_or("reset");
            Color::from_str(v).map_err(|_| invalid(format!("colors.{key}: bad colour `{v}`")))
        };
        let modifier = |key: &str| -> Result<Modifier, ThemeError> {
            match file.modifiers.get(key) {
                Some(v) => parse_modifiers(v).map_err(|e| invalid(format!("modifiers.{key}: {e}"))),
                None => Ok(Modifier::empty()),
            }
        };
        let fg = |key: &str| -> Result<Style, ThemeError> {
            Ok(Style::default()
                .fg(color(key)?)
                .add_modifier(modifier(key)?))
        };
        let base = Style::default().fg(color("fg")?).bg(color("bg")?);
        Ok(Theme {
            name: name.to_string(),
            base,
            muted: fg("muted")?,
            accent: fg("accent")?,
            border: fg("border")?,
            border_focused: fg("border_focused")?,
            title: fg("title")?,
            title_focused: fg("title_focused")?.add_modifier(Modifier::BOLD),
            selection: Style::default()
                .fg(color("selection_fg")?)
                .bg(color("selection_bg")?)
                .add_modifier(modifier("selection")?),
            header: Style::default()
                .fg(color("header_fg")?)
                .bg(color("header_bg")?),
            footer: Style::default()
                .fg(color("footer_fg")?)
                .bg(color("footer_bg")?),
            key: fg("key")?.add_modifier(Modifier::BOLD),
            error: fg("error")?,
            warn: fg("warn")?,
            info: fg("info")?,
            debug: fg("debug")?,
            success: fg("success")?,
            dir: fg("dir")?.add_modifier(Modifier::BOLD),
            symlink: fg("symlink")?,
            binary: fg("binary")?,
            line_number: fg("line_number")?,
            matched: Style::default()
                .fg(color("match_fg")?)
                .bg(color("match_bg")?),
            link: fg("link")?.add_modifier(Modifier::UNDERLINED),
        })
    }

    /// The same roles without any colour: told apart by modifiers only
    /// (what `NO_COLOR` asks for).
    pub fn monochrome(&self) -> Theme {
        let plain = Style::default();
        Theme {
            name: format!("{} (no colour)", self.name),
            base: plain,
            muted: plain.add_modifier(Modifier::DIM),
            accent: plain.add_modifier(Modifier::BOLD),
            border: plain,
            border_focused: plain.add_modifier(Modifier::BOLD),
            title: plain,
            title_focused: plain.add_modifier(Modifier::BOLD | Modifier::UNDERLINED),
            selection: plain.add_modifier(Modifier::REVERSED),
            header: plain.add_modifier(Modifier::REVERSED),
            footer: plain,
            key: plain.add_modifier(Modifier::BOLD),
            error: plain.add_modifier(Modifier::BOLD),
            warn: plain.add_modifier(Modifier::BOLD),
            info: plain,
            debug: plain.add_modifier(Modifier::DIM),
            success: plain,
            dir: plain.add_modifier(Modifier::BOLD),
            symlink: plain.add_modifier(Modifier::ITALIC),
            binary: plain.add_modifier(Modifier::DIM),
            line_number: plain.add_modifier(Modifier::DIM),
            matched: plain.add_modifier(Modifier::REVERSED | Modifier::UNDERLINED),
            link: plain.add_modifier(Modifier::UNDERLINED),
        }
    }

    /// Style for a log level name (`error`, `warn`, `info`, `debug`).
    pub fn level(&self, level: &str) -> Style {
        match level {
            "error" => self.error,
            "warn" => self.warn,
            "info" => self.info,
            _ => self.debug,
        }
    }
}

/// True when `NO_COLOR` asks for no colour (set and non-empty).
pub fn no_color_requested() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_differ() {
        let dark = Theme::builtin("dark").unwrap();
        let light = Theme::builtin("light").unwrap();
        let hc = Theme::builtin("high-contrast").unwrap();
        assert_ne!(dark.selection, light.selection);
        assert!(hc.selection.add_modifier.contains(Modifier::BOLD));
        assert_eq!(hc.base.bg, Some(Color::Black));
    }

    #[test]
    fn missing_keys_fall_back_and_bad_ones_are_named() {
        let t = Theme::parse("mine", "[colors]\nerror = \"#ff0000\"\n", "mine.toml").unwrap();
        assert_eq!(t.error.fg, Some(Color::Rgb(255, 0, 0)));
        assert_eq!(t.dir.fg, Theme::default().dir.fg);
        let e = Theme::parse("x", "[colors]\nerorr = \"red\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("erorr"), "{e}");
        let e = Theme::parse("x", "[colors]\nerror = \"redd\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("colors.error"), "{e}");
        assert!(
            Theme::builtin("nope")
                .unwrap_err()
                .to_string()
                .contains("high-contrast")
        );
    }

    #[test]
    fn monochrome_has_no_colour() {
        let m = Theme::default().monochrome();
        for s in [m.base, m.selection, m.error, m.dir, m.header] {
            assert_eq!(s.fg, None);
            assert_eq!(s.bg, None);
        }
        assert!(m.selection.add_modifier.contains(Modifier::REVERSED));
    }

    #[test]
    fn user_theme_dir_is_listed_and_wins() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("solar.toml"), "[colors]\naccent = \"3\"\n").unwrap();
        assert!(Theme::available(Some(dir.path())).contains(&"solar".to_string()));
        let t = Theme::load("solar", Some(dir.path())).unwrap();
        assert_eq!(t.accent.fg, Some(Color::Indexed(3)));
    }
}
