//! The engine: a workspace on a backend sandbox — layout, built-in tools,
//! skills, MCP declarations, offloading, the session journal and the typed
//! event bus. Knows nothing of which backend it runs on, nor of any UI.

pub mod activity;
pub mod base;
pub mod bus;
pub mod error;
pub mod events;
pub mod journal;
pub mod jsonl;
pub mod layout;
pub mod mcp;
pub mod message;
pub mod offload;
pub mod read_only;
pub mod rewrite_guard;
pub mod serve;
pub mod sessions;
pub mod shell_session;
pub mod skills;
pub mod timeline;
pub mod tools;
pub mod workspace;

pub use events::{Event, EventBus};
pub use workspace::{ToolCall, Workspace, WorkspaceConfig, WorkspaceError};
