//! Workspaces of the selected profile, from the workspace manager
//! (docs/contract.md §8): id, profile / backend, state, user / agent, age, idle
//! time / TTL left and labels. Enter opens one (the whole app switches to
//! it), `n` creates one (after asking) and opens it, `c` closes
//! (suspends) one after asking, `D` destroys one after asking, `R` retries a failed
//! one; failures show their reason. `C` runs the gc sweep of `wsbench
//! workspaces gc` for the profile (`gc.rs`).
//!
//! Every manager call runs on a task ([`Ctx::spawn`]): listing a cloud
//! provider may take seconds and must never stall the render loop.

use std::collections::HashMap;
use std::sync::Arc;

use ratatui::Frame;
use ratatui::crossterm::event::MouseEvent;
use ratatui::layout::Rect;

use crate::engine::Workspace;
use crate::engine::events::Event;
use crate::manager::{WorkspaceInfo, WorkspaceManager, display};

use crate::tui::action::{DialogTag, Level, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{Ctx, ListMouse, Pane, list_mouse, nav};
use crate::tui::widgets::filtered::FilteredList;
use crate::tui::widgets::single_flight::SingleFlight;

mod act;
mod cells;
mod gc;
mod msg;
mod open;
mod recovery;
mod render;

pub use open::resolve_ws;

/// Pane id.
pub const ID: &str = "workspaces";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum WorkspacesAction in "workspaces";
    Open => act("workspaces.open", ID, "open", &["enter"], false, true),
    New => act("workspaces.new", ID, "new workspace", &["n"], true, true),
    Close => act("workspaces.close", ID, "close", &["c"], false, true),
    Destroy => act("workspaces.destroy", ID, "destroy", &["D", "delete"], true, true),
    Retry => act("workspaces.retry", ID, "retry failed", &["R"], false, true),
    Gc => act("workspaces.gc", ID, "gc: close idle past TTL", &["C"], true, false),
    Describe => act("workspaces.describe", ID, "describe", &["d"], false, false),
    Refresh => act("workspaces.refresh", ID, "refresh", &["r"], false, false),
    Filter => act("workspaces.filter", ID, "filter", &["/"], false, true),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = WorkspacesAction::TABLE;

/// Tag of the "create a new workspace?" dialog (not a workspace id:
/// ids cannot contain a space).
const NEW_TAG: &str = "new workspace";

/// Ticks (about a second each) between background refreshes, so ages and
/// TTLs move without hammering a slow provider.
const REFRESH_TICKS: u32 = 5;

pub(crate) enum Msg {
    Listed(Result<Vec<WorkspaceInfo>, String>),
    Opened(String, Result<Arc<Workspace>, String>),
    Done(Result<String, String>),
    Profile(String, Result<WorkspaceManager, String>),
    /// The gc sweep's dry run (`act` false) or real run.
    Gc {
        act: bool,
        found: Result<Vec<crate::manager::GcFinding>, String>,
    },
}

/// The Workspaces pane.
pub struct WorkspacesPane {
    rows: Vec<WorkspaceInfo>,
    list: FilteredList,
    job: SingleFlight,
    error: Option<String>,
    /// Our own failed opens, by id (shown in the row with a retry).
    failures: HashMap<String, String>,
    opening: Option<String>,
    /// Set by `:profile` to the previous profile: the next listing opens
    /// the new profile's workspace of the same user and agent.
    follow_from: Option<String>,
    ticks: u32,
    inner: Rect,
    /// Recovery steps from the bus (lost, recovering, replaced).
    recovery: recovery::RecoveryMarks,
    /// A gc sweep (dry run or real) is running.
    sweeping: bool,
}

impl Default for WorkspacesPane {
    fn default() -> Self {
        Self::new()
    }
}
impl WorkspacesPane {
    /// An empty pane (lists on init when there is a manager).
    pub fn new() -> Self {
        WorkspacesPane {
            rows: Vec::new(),
            list: FilteredList::default(),
            job: SingleFlight::default(),
            error: None,
            failures: HashMap::new(),
            opening: None,
            follow_from: None,
            ticks: 0,
            inner: Rect::default(),
            recovery: Default::default(),
            sweeping: false,
        }
    }

    /// Workspace ids of the last listing (palette completion, tests).
    pub fn ids(&self) -> Vec<String> {
        self.rows.iter().map(|r| r.id.clone()).collect()
    }

    /// The reason the last open of `id` failed, if it did.
    pub fn failure(&self, id: &str) -> Option<&str> {
        self.failures.get(id).map(String::as_str)
    }

    fn load(&mut self, cx: &mut Ctx) {
        let Some(m) = cx.manager.clone() else {
            return;
        };
        if self.job.request(()).is_none() {
            return;
        }
        cx.spawn::<WorkspacesPane>(async move {
            Msg::Listed(m.list().await.map_err(|e| e.to_string()))
        });
    }

    fn refilter(&mut self) {
        let rows = &self.rows;
        self.list.refilter(rows.len(), |f, i| {
            let r = &rows[i];
            f.matches(&r.id)
                || f.matches(&r.state)
                || r.user.as_deref().is_some_and(|u| f.matches(u))
                || r.agent.as_deref().is_some_and(|a| f.matches(a))
                || f.matches(&display::labels(r))
        });
    }

    fn selected(&self) -> Option<&WorkspaceInfo> {
        self.list.selected().map(|i| &self.rows[i])
    }

    /// State text and reason of a row, our own failures included.
    fn state_of<'a>(&'a self, w: &'a WorkspaceInfo) -> (String, Option<&'a str>) {
        if let Some(r) = self.failures.get(&w.id) {
            return ("failed".into(), Some(r.as_str()));
        }
        if self.opening.as_deref() == Some(w.id.as_str()) {
            return ("opening…".into(), None);
        }
        if let Some(step) = self.recovery.label(&w.id, std::time::Instant::now()) {
            return (step.into(), None);
        }
        (display::state(w), w.reason.as_deref())
    }
}

impl WorkspacesPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: WorkspacesAction, cx: &mut Ctx) -> bool {
        match action {
            WorkspacesAction::Nav(verb) => {
                nav(&mut self.list.cursor, verb, self.list.shown.len());
            }
            WorkspacesAction::Open
            | WorkspacesAction::Close
            | WorkspacesAction::Destroy
            | WorkspacesAction::Retry
            | WorkspacesAction::Describe => self.act_on_selected(action, cx),
            WorkspacesAction::New => match &cx.manager {
                Some(m) => {
                    let msg = format!(
                        "Create a new workspace in profile {} for agent {:?}, session {:?}?",
                        m.profile(),
                        cx.agent,
                        cx.session
                    );
                    cx.effect(crate::tui::action::Effect::Confirm {
                        pane: ID,
                        message: msg,
                        tag: DialogTag::WorkspaceNew,
                    });
                }
                None => cx.toast(
                    Level::Warn,
                    "no workspace manager: this TUI was opened on a single directory",
                ),
            },
            WorkspacesAction::Gc => self.gc(false, cx),
            WorkspacesAction::Refresh => self.load(cx),
            WorkspacesAction::Filter => self.list.filter.begin(),
        }
        true
    }
}

impl Pane for WorkspacesPane {
    crate::task_pane_glue!(actions: WorkspacesAction);

    fn title(&self) -> String {
        format!("Workspaces ({})", self.rows.len())
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.load(cx);
    }

    crate::filtered_list_input!(list, refilter);

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Engine(env) => {
                if let Event::Workspace { state } = &env.event {
                    self.recovery
                        .note(&env.workspace, state, std::time::Instant::now());
                    self.load(cx);
                }
            }
            PaneEvent::Confirmed(DialogTag::WorkspaceNew) => {
                let Some(m) = cx.manager.clone() else { return };
                let (user, agent, session) =
                    (cx.user_id.clone(), cx.agent.clone(), cx.session.clone());
                self.opening = Some("new workspace".into());
                cx.spawn::<WorkspacesPane>(async move {
                    match m.create(&user, &agent, &session).await {
                        Ok(ws) => Msg::Opened(ws.id().to_string(), Ok(ws)),
                        Err(e) => Msg::Opened("new workspace".into(), Err(e.to_string())),
                    }
                });
            }
            PaneEvent::Confirmed(DialogTag::WorkspaceGc) => self.gc(true, cx),
            PaneEvent::Confirmed(DialogTag::WorkspaceClose { id }) => self.close_confirmed(id, cx),
            PaneEvent::Confirmed(DialogTag::WorkspaceDestroy { id }) => {
                let Some(m) = cx.manager.clone() else { return };
                let id = id.clone();
                cx.spawn::<WorkspacesPane>(async move {
                    Msg::Done(match m.destroy(&id).await {
                        Ok(true) => Ok(format!("destroyed {id}")),
                        Ok(false) => Err(format!("no workspace {id}")),
                        Err(e) => Err(e.to_string()),
                    })
                });
            }
            PaneEvent::Tick => {
                self.ticks += 1;
                if self.ticks >= REFRESH_TICKS {
                    self.ticks = 0;
                    self.load(cx);
                }
            }
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.list.cursor, ev, self.inner, self.list.shown.len()) {
            ListMouse::Clicked(_, true) => self.act(WorkspacesAction::Open, cx),
            ListMouse::None => false,
            _ => true,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        self.draw(f, area, focused, cx)
    }
}
