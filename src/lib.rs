//! wsbench — a terminal workbench for AI-agent workspaces.
//!
//! Layers, top to bottom; a module imports only modules below it:
//! `tui`, `cli` (never each other; the binary dispatches) → `root` (the
//! composition root: config, profile wiring, the manager factory,
//! workspace opening) → `config` → `manager`, `agent` → `engine` →
//! `backend`.

pub mod agent;
pub mod backend;
pub mod cli;
pub mod config;
pub mod engine;
pub mod manager;
pub mod root;
pub mod tui;
