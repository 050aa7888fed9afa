//! Building blocks the panes share: safe text, ANSI output parsing,
//! bounded buffers, list scrolling, `/` filters and one-line fields, a
//! filtered list, the prompt field and a single-flight job.

pub mod ansi;
pub mod filter;
pub mod filtered;
pub mod follow;
pub mod line;
pub mod list;
pub mod paste;
pub mod prompt;
pub mod rect;
pub mod ring;
pub mod search;
pub mod single_flight;
pub mod text;
