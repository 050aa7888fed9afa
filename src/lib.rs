//! wsbench — a terminal workbench for AI-agent workspaces.
//!
//! Layers, one direction of dependency: `tui -> manager -> engine -> backend`
//! (see `../shared/DESIGN.md`).

pub mod backend;
pub mod cli;
pub mod config;
pub mod engine;
pub mod manager;
