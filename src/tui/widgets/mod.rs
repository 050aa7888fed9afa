//! Building blocks the panes share: safe text, ANSI output parsing,
//! bounded buffers, list scrolling and `/` filters.

pub mod ansi;
pub mod filter;
pub mod list;
pub mod ring;
pub mod text;
