//! Panes: each a component with its own state, keys and render.
//!
//! # Adding a pane (the extension point)
//!
//! 1. Implement [`Pane`](crate::tui::pane::Pane) and
//!    [`TaskPane`](crate::tui::pane::TaskPane) in a new module
//!    (`panes/<id>.rs`, or `panes/<id>/` split by job once it grows).
//!    Declare the actions with `crate::pane_action_enum!`: one line per
//!    action (`Open => act("<id>.open", ID, "open", &["enter"], false,
//!    true)`) gives a typed enum `<Id>Action` and its table
//!    `<Id>Action::TABLE` (set `pub const ACTIONS` to it); a list pane's
//!    enum also gets `Nav(Nav)` for j/k/pgdn/pgup/g/G, and the form
//!    `enum X in "<id>", no nav;` leaves those out (editor, help).
//!    Write the typed handler `fn act(&mut self, a: <Id>Action, cx) ->
//!    bool` and, inside `impl Pane`, `crate::task_pane_glue!(actions:
//!    <Id>Action);` (id, task delivery, `as_any_mut`, `on_action` parsing
//!    into `act`). Mouse handlers call `act` with a variant, never a name.
//!    Then `on_event` for engine events, `on_msg` for the results of its
//!    own tasks, and `render`. Long work goes through
//!    [`Ctx::spawn`](crate::tui::pane::Ctx::spawn), never inline.
//! 2. Use the shared widgets instead of writing the glue again
//!    (`tui::widgets`): a filtered list is a `filtered::FilteredList`
//!    (filter, cursor, shown rows) plus `crate::filtered_list_input!(list,
//!    refilter);` for its keys, drawn with `pane::list_frame` and
//!    `pane::list_placeholder`; a reload or preview that must not run
//!    twice at once is a `single_flight::SingleFlight`; a multi-line
//!    prompt is a `prompt::PromptField`.
//! 3. Register it in [`registry`] (one line) and give it a place in
//!    the app's `default_layout` (`tui/app/layout.rs`, a leaf of the split tree), or
//!    leave it out of the layout to make it a full-screen pane opened
//!    by an effect (like the editor and viewer).
//! 4. Its keys appear in the footer, in `?` help and under `:` in the
//!    palette by themselves, are rebindable from `[tui.keys]` by action
//!    name, and its destructive actions (`dangerous: true`) disappear in
//!    `--read-only` mode.

pub mod agent;
pub mod command;
pub mod describe;
pub mod editor;
pub mod files;
pub mod finder;
pub mod grep;
pub mod help;
pub mod logs;
pub mod mcp;
pub mod offload;
pub mod palette;
pub mod sessions;
pub mod skills;
pub mod viewer;
pub mod workspaces;

use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{Ctx, Pane};

pub use crate::tui::pane::ManagerFactory;

/// Every action of every built-in pane and overlay, in table order (the
/// app adds its own global ones in front).
pub fn pane_actions() -> Vec<ActionSpec> {
    let mut v = Vec::new();
    for list in [
        sessions::ACTIONS,
        files::ACTIONS,
        grep::ACTIONS,
        finder::ACTIONS,
        editor::ACTIONS,
        skills::ACTIONS,
        offload::ACTIONS,
        command::ACTIONS,
        logs::ACTIONS,
        viewer::ACTIONS,
        help::ACTIONS,
        palette::ACTIONS,
        agent::ACTIONS,
        workspaces::ACTIONS,
        mcp::ACTIONS,
        mcp::TOOL_ACTIONS,
    ] {
        v.extend_from_slice(list);
    }
    v
}

/// The built-in panes, in focus order. Add new panes here.
pub fn registry(cx: &Ctx) -> Vec<Box<dyn Pane>> {
    vec![
        Box::new(sessions::SessionsPane::new()),
        Box::new(files::FilesPane::new()),
        Box::new(skills::SkillsPane::new()),
        Box::new(offload::OffloadPane::new()),
        Box::new(command::CommandPane::new(&cx.config)),
        Box::new(logs::LogsPane::with_budget(
            cx.config.log_buffer_lines,
            cx.config.log_buffer_bytes,
        )),
        Box::new(workspaces::WorkspacesPane::new()),
        Box::new(mcp::McpPane::new()),
        Box::new(editor::EditorPane::new()),
        Box::new(viewer::ViewerPane::new()),
        Box::new(grep::GrepPane::new()),
        Box::new(finder::FinderPane::new()),
        Box::new(agent::AgentPane::new(&cx.config)),
    ]
}
