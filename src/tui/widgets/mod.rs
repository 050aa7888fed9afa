//! Building blocks the panes share: safe text, ANSI output parsing,
//! bounded buffers, list scrolling, `/` filters and one-line fields.

pub mod ansi;
pub mod filter;
pub mod follow;
pub mod line;
pub mod list;
pub mod paste;
pub mod rect;
pub mod ring;
pub mod text;
