//! The `[tui]` section's data lives with the rest of the config, in
//! [`crate::config::tui`]; this path keeps the TUI's own `use` lines short.

pub use crate::config::tui::*;
