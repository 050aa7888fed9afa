//! Workspaces of the selected profile, from the workspace manager
//! (docs/contract.md §8): id, profile / backend, state, user / agent, age, idle
//! time / TTL left and labels. Enter opens one (the whole app switches to
//! it), `n` creates one (after asking) and opens it, `c` closes
//! (suspends) one, `D` destroys one after asking, `R` retries a failed
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
use ratatui::text::{Line, Span};

use crate::backend::text::head_cols;
use crate::engine::Workspace;
use crate::engine::events::Event;
use crate::manager::{WorkspaceInfo, WorkspaceManager, display};

use crate::tui::action::{DialogTag, Level, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::filter_suffix;
use crate::tui::pane::{Ctx, ListMouse, Pane, TaskPane, filter_bar, list_mouse, nav, placeholder};
use crate::tui::widgets::filtered::FilteredList;
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::single_flight::SingleFlight;
use crate::tui::widgets::text;

mod gc;
mod recovery;

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

/// `user/agent` of a row, as `wsbench workspaces list` shows them.
fn user_agent(w: &WorkspaceInfo) -> String {
    format!(
        "{}/{}",
        display::id_or_default(w.user.as_deref()),
        display::id_or_default(w.agent.as_deref())
    )
}

/// `idle/ttl left`, in the units of `wsbench workspaces list`.
fn idle_ttl(w: &WorkspaceInfo) -> String {
    format!(
        "{}/{}",
        display::span(w.idle_secs),
        display::span(w.ttl_left_secs)
    )
}

/// What `:ws <text>` names among `rows`: an exact id, else the rows whose
/// id starts with it or whose user or agent id equals it.
pub fn resolve_ws<'a>(rows: &'a [WorkspaceInfo], wanted: &str) -> Vec<&'a WorkspaceInfo> {
    if let Some(w) = rows.iter().find(|r| r.id == wanted) {
        return vec![w];
    }
    rows.iter()
        .filter(|r| {
            r.id.starts_with(wanted)
                || r.user.as_deref() == Some(wanted)
                || r.agent.as_deref() == Some(wanted)
        })
        .collect()
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

    /// Opens workspace `id` through the manager and switches the app to
    /// it (`:ws <id>`, Enter). Reports a missing manager or an unknown id.
    pub fn open_id(&mut self, id: &str, cx: &mut Ctx) {
        let Some(m) = cx.manager.clone() else {
            cx.toast(
                Level::Warn,
                "no workspace manager: this TUI was opened on a single directory",
            );
            return;
        };
        let hits = resolve_ws(&self.rows, id);
        let id = match hits[..] {
            [one] => one.id.clone(),
            [] => id.to_string(),
            _ => {
                let names: Vec<String> = hits
                    .iter()
                    .map(|w| format!("{} ({})", w.id, user_agent(w)))
                    .collect();
                cx.toast(
                    Level::Warn,
                    format!("`:ws {id}` matches {}: {}", names.len(), names.join(", ")),
                );
                return;
            }
        };
        let id = id.as_str();
        if id == cx.ws.id() {
            cx.toast(Level::Info, format!("workspace {id} is already open"));
            return;
        }
        self.opening = Some(id.to_string());
        let id = id.to_string();
        cx.spawn::<WorkspacesPane>(async move {
            let r = m.open(&id).await.map_err(|e| e.to_string());
            Msg::Opened(id, r)
        });
    }

    /// Makes the manager of profile `name` the current one (`:profile
    /// <name>`) and lists its workspaces. The open workspace stays open.
    pub fn switch_profile(&mut self, name: &str, cx: &mut Ctx) {
        let Some(make) = cx.manager_factory.clone() else {
            cx.toast(
                Level::Warn,
                "no profiles here: this TUI was opened without the workspace manager",
            );
            return;
        };
        let name = name.to_string();
        cx.spawn::<WorkspacesPane>(async move {
            // Building a provisioner reads config and may probe the
            // backend: off the render loop like everything else.
            let r = make(&name).map_err(|e| format!("{e:#}"));
            Msg::Profile(name, r)
        });
    }

    /// After `:profile`: opens the new profile's workspace of the open
    /// one's user and agent (the session's, when there are several); when
    /// it has none, says so and how to make one (the header marks the open
    /// workspace as `old`'s meanwhile).
    fn follow_profile(&mut self, old: &str, cx: &mut Ctx) {
        let (user, agent) = (cx.user_id.clone(), cx.agent.clone());
        let mine: Vec<&WorkspaceInfo> = self
            .rows
            .iter()
            .filter(|w| {
                w.user.as_deref().unwrap_or("") == user && w.agent.as_deref().unwrap_or("") == agent
            })
            .collect();
        let pick = match mine[..] {
            [one] => Some(one.id.clone()),
            [] => None,
            _ => mine
                .iter()
                .find(|w| w.session.as_deref() == Some(cx.session.as_str()))
                .or(mine.first())
                .map(|w| w.id.clone()),
        };
        let p = cx.header.profile.clone();
        match pick {
            Some(id) if id == cx.ws.id() => {}
            Some(id) => {
                cx.toast(
                    Level::Info,
                    format!("profile {p}: opening workspace {id} of the same user and agent"),
                );
                self.open_id(&id, cx);
            }
            None => {
                let short = &cx.ws.id()[..cx.ws.id().len().min(12)];
                cx.toast(
                    Level::Info,
                    format!(
                        "profile {p} has no workspace for user {} agent {}: n creates one; \
                         the open workspace {short} is still profile {old}'s",
                        display::id_or_default(Some(&user)),
                        display::id_or_default(Some(&agent)),
                    ),
                );
            }
        }
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

    fn act_on_selected(&mut self, action: WorkspacesAction, cx: &mut Ctx) {
        let Some(w) = self.selected() else {
            return;
        };
        let id = w.id.clone();
        let failed = w.state == "failed" || self.failures.contains_key(&id);
        match action {
            WorkspacesAction::Open => self.open_id(&id, cx),
            WorkspacesAction::Retry if failed => {
                self.failures.remove(&id);
                self.open_id(&id, cx)
            }
            WorkspacesAction::Retry => cx.toast(Level::Info, format!("{id} has not failed")),
            WorkspacesAction::Describe => {
                // The open workspace's layout is known here; another's
                // lives at its `location`.
                let paths = if id == cx.ws.id() {
                    super::describe::layout_paths(cx.ws.layout())
                } else {
                    Vec::new()
                };
                let doc = super::describe::doc("workspace", &id, w, &paths, &cx.theme);
                cx.effect(crate::tui::action::Effect::OpenViewer(doc));
            }
            WorkspacesAction::Close | WorkspacesAction::Destroy if id == cx.ws.id() => cx.toast(
                Level::Warn,
                format!("{id} is the open workspace: open another one first"),
            ),
            WorkspacesAction::Close => {
                let Some(m) = cx.manager.clone() else { return };
                cx.spawn::<WorkspacesPane>(async move {
                    Msg::Done(match m.close(&id).await {
                        Ok(true) => Ok(format!("closed {id}")),
                        Ok(false) => Err(format!("no workspace {id}")),
                        Err(e) => Err(e.to_string()),
                    })
                });
            }
            WorkspacesAction::Destroy => cx.effect(crate::tui::action::Effect::Confirm {
                pane: ID,
                message: format!("Destroy workspace {id} and all its files?"),
                tag: DialogTag::WorkspaceDestroy { id },
            }),
            _ => {}
        }
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
        let t = &cx.theme;
        let note = match (&self.opening, &cx.manager) {
            (Some(id), _) => format!("opening {}…", head_cols(id, 12)),
            (None, Some(m)) => format!("profile {}", m.profile()),
            (None, None) => String::new(),
        };
        let block = cx.block_for(
            area,
            &format!("{}{}", self.title(), filter_suffix(&self.list.filter)),
            &note,
            focused,
        );
        let inner = block.inner(area);
        f.render_widget(block, area);
        let mut list = filter_bar(f, inner, &self.list.filter, cx);
        if cx.manager.is_none() {
            self.inner = list;
            placeholder(f, list, "no workspace manager: one directory only", t.muted);
            return;
        }
        if let Some(e) = &self.error {
            self.inner = list;
            // Wrapped, so the whole reason is readable (also in Logs).
            let p = ratatui::widgets::Paragraph::new(
                text::display(&format!("error: {e}")).into_owned(),
            )
            .style(t.error)
            .wrap(ratatui::widgets::Wrap { trim: true });
            f.render_widget(p, list);
            return;
        }
        // The open workspace may not be this profile's (`--workdir`, or
        // after `:profile`): say so rather than leave it unexplained.
        let current = cx.ws.id().to_string();
        let outside =
            (!self.job.running() && !self.rows.iter().any(|r| r.id == current)).then(|| {
                let p = cx.manager.as_ref().map_or("", |m| m.profile());
                let short = head_cols(&current, 12);
                format!("the open workspace {short} is not one of profile {p}'s")
            });
        if self.list.shown.is_empty() {
            self.inner = list;
            let msg = if self.job.running() {
                "loading…"
            } else if self.list.filter.active() && !self.rows.is_empty() {
                "no match"
            } else {
                "no workspaces in this profile: n creates one"
            };
            placeholder(f, list, msg, t.muted);
            if let Some(note) = &outside
                && list.height >= 3
            {
                let w = list.width as usize;
                let line = text::truncate(&text::display(note), w).into_owned();
                let x = list.x + (w.saturating_sub(text::width(&line)) / 2) as u16;
                let y = list.y + list.height.saturating_sub(1) / 2 + 1;
                f.buffer_mut().set_string(x, y, line, t.muted);
            }
            return;
        }
        let w = list.width as usize;
        // Columns by priority: what fits is shown. Cells are those of
        // `wsbench workspaces list` (crate::manager::display).
        let wide = w >= 100;
        let mid = w >= 60;
        // Whole ids where there is room (`:ws <id>` needs them), at
        // least 14 columns so the others line up.
        let longest = self
            .list
            .shown
            .iter()
            .map(|&i| text::width(&self.rows[i].id))
            .max()
            .unwrap_or(0);
        let idw = if wide {
            longest.clamp(14, w.saturating_sub(88).max(14))
        } else if mid {
            longest.clamp(14, w.saturating_sub(46).max(14))
        } else {
            14
        };
        // The selected row's failure reason gets its own line.
        let reason = self
            .selected()
            .and_then(|s| self.state_of(s).1.map(String::from));
        if let Some(r) = &reason
            && list.height >= 3
        {
            let y = list.y + list.height - 1;
            let line = text::truncate(&text::display(&format!("✗ {r}  (R retry)")), w).into_owned();
            f.buffer_mut().set_string(list.x, y, line, t.error);
            list.height -= 1;
        }
        if let Some(note) = &outside
            && list.height >= 4
        {
            let y = list.y + list.height - 1;
            let line = text::truncate(&text::display(&format!("○ {note}")), w).into_owned();
            f.buffer_mut().set_string(list.x, y, line, t.muted);
            list.height -= 1;
        }
        if list.height >= 3 {
            let head = if wide {
                format!(
                    "  {:<idw$} {:<14} {:<17} {:<20} {:>7} {:>15} LABELS",
                    "ID", "PROFILE/BE", "STATE", "USER/AGENT", "AGE", "IDLE/TTL LEFT"
                )
            } else if mid {
                format!(
                    "  {:<idw$} {:<17} {:>7} {:>15}",
                    "ID", "STATE", "AGE", "IDLE/TTL LEFT"
                )
            } else {
                format!("  {:<14} STATE", "ID")
            };
            f.buffer_mut()
                .set_string(list.x, list.y, text::truncate(&head, w), t.muted);
            list.y += 1;
            list.height -= 1;
        }
        self.inner = list;
        let rows: Vec<(String, Option<String>)> = self
            .list
            .shown
            .iter()
            .map(|&i| {
                let (s, r) = self.state_of(&self.rows[i]);
                (s, r.map(String::from))
            })
            .collect();
        let shown = &self.list.shown;
        let data = &self.rows;
        render_rows(
            f.buffer_mut(),
            list,
            &mut self.list.cursor,
            shown.len(),
            focused,
            t.selection,
            |i| {
                let r = &data[shown[i]];
                let (state, _) = &rows[i];
                let mark = if r.id == current { "● " } else { "  " };
                let sstyle = match state.as_str() {
                    "failed" | "unknown" => t.error,
                    s if s.starts_with("running") => t.success,
                    _ => t.warn,
                };
                let id = text::fit(&text::display(&r.id), idw);
                let idle = idle_ttl(r);
                let age = display::span(r.age_secs);
                let state_cell = text::fit(&text::display(state), 17);
                let mut spans = vec![
                    Span::styled(mark, t.accent),
                    Span::styled(id, t.base),
                    Span::raw(" "),
                ];
                if wide {
                    let pb = format!("{}/{}", r.profile, r.backend);
                    let ua = user_agent(r);
                    spans.push(Span::styled(
                        format!("{} ", text::fit(&text::display(&pb), 14)),
                        t.muted,
                    ));
                    spans.push(Span::styled(format!("{state_cell} "), sstyle));
                    spans.push(Span::styled(
                        format!("{} ", text::fit(&text::display(&ua), 20)),
                        t.base,
                    ));
                    spans.push(Span::styled(format!("{age:>7} {idle:>15} "), t.muted));
                    let used = 2 + idw + 1 + 15 + 18 + 21 + 24;
                    let labels = text::display(&display::labels(r)).into_owned();
                    spans.push(Span::styled(
                        text::truncate(&labels, w.saturating_sub(used)).into_owned(),
                        t.muted,
                    ));
                } else if mid {
                    spans.push(Span::styled(format!("{state_cell} "), sstyle));
                    spans.push(Span::styled(format!("{age:>7} {idle:>15}"), t.muted));
                } else {
                    let rest = w.saturating_sub(idw + 3).max(1);
                    spans.push(Span::styled(
                        text::truncate(&text::display(state), rest).into_owned(),
                        sstyle,
                    ));
                }
                Line::from(spans)
            },
        );
    }
}

impl TaskPane for WorkspacesPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Listed(r) => {
                self.job.done();
                match r {
                    Ok(rows) => {
                        self.rows = rows.clone();
                        self.error = None;
                        cx.workspace_ids = self.ids();
                        cx.workspace_notes = self
                            .rows
                            .iter()
                            .map(|w| {
                                let n = format!("{} · {}", user_agent(w), display::state(w));
                                (w.id.clone(), n)
                            })
                            .collect();
                        if let Some(old) = self.follow_from.take() {
                            self.follow_profile(&old, cx);
                        }
                    }
                    Err(e) => {
                        // In full in Logs (once, not on every refresh).
                        if self.error.as_ref() != Some(e) {
                            let p = cx.manager.as_ref().map_or("", |m| m.profile());
                            cx.effect(crate::tui::action::Effect::Log(
                                crate::tui::action::LogLine::now(
                                    Level::Error,
                                    "workspaces",
                                    format!("listing profile {p}: {e}"),
                                ),
                            ));
                        }
                        self.error = Some(e.clone());
                        self.follow_from = None;
                    }
                }
                self.refilter();
                if self.job.wanted() {
                    self.load(cx);
                }
            }
            Msg::Opened(id, r) => {
                self.opening = None;
                match r {
                    Ok(ws) => {
                        self.failures.remove(id);
                        cx.toast(Level::Info, format!("opened workspace {id}"));
                        cx.switch_workspace(ws.clone());
                    }
                    Err(e) => {
                        self.failures.insert(id.clone(), e.clone());
                        let ids = self.ids();
                        let mut msg = format!("opening {id} failed: {e}");
                        if !ids.contains(id) && id != NEW_TAG {
                            let near = crate::tui::panes::palette::close_matches(id, &ids, 3);
                            if !near.is_empty() {
                                msg.push_str(&format!(" — did you mean {}?", near.join(", ")));
                            }
                        }
                        cx.toast(Level::Error, msg);
                        self.load(cx);
                    }
                }
            }
            Msg::Done(r) => {
                match r {
                    Ok(m) => cx.toast(Level::Info, m.clone()),
                    Err(e) => cx.toast(Level::Error, e.clone()),
                }
                self.load(cx);
            }
            Msg::Gc { act, found } => self.gc_found(*act, found, cx),
            Msg::Profile(name, r) => match r {
                Ok(m) => {
                    cx.switch_manager(m.clone());
                    self.follow_from =
                        Some(std::mem::replace(&mut cx.header.profile, name.clone()));
                    self.failures.clear();
                    self.rows.clear();
                    cx.workspace_ids.clear();
                    self.refilter();
                    cx.toast(Level::Info, format!("profile {name}"));
                    self.load(cx);
                }
                // Profile errors name the profile already: one lead-in.
                Err(e) if e.contains(&format!("profile `{name}`")) => {
                    cx.toast(Level::Error, e.clone())
                }
                Err(e) => cx.toast(Level::Error, format!("profile {name}: {e}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, user: &str, agent: &str) -> WorkspaceInfo {
        WorkspaceInfo {
            id: id.into(),
            profile: "local".into(),
            backend: crate::backend::BackendKind::Local,
            state: "running".into(),
            reason: None,
            open: false,
            leases: 0,
            user: Some(user.into()),
            agent: Some(agent.into()),
            session: None,
            location: None,
            created_at: None,
            age_secs: None,
            idle_secs: None,
            ttl_left_secs: None,
            labels: Default::default(),
        }
    }

    #[test]
    fn ws_resolves_ids_prefixes_users_and_agents() {
        let rows = vec![
            row("ab12", "alice", "coder"),
            row("ab34", "bob", "coder"),
            row("cd56", "alice", "reviewer"),
            row("ab", "carol", "x"),
        ];
        let ids = |v: Vec<&WorkspaceInfo>| v.iter().map(|w| w.id.clone()).collect::<Vec<_>>();
        // An exact id wins over the ids it prefixes.
        assert_eq!(ids(resolve_ws(&rows, "ab")), ["ab"]);
        assert_eq!(ids(resolve_ws(&rows, "ab3")), ["ab34"]);
        assert_eq!(ids(resolve_ws(&rows, "bob")), ["ab34"]);
        assert_eq!(ids(resolve_ws(&rows, "reviewer")), ["cd56"]);
        assert_eq!(ids(resolve_ws(&rows, "alice")), ["ab12", "cd56"]);
        assert_eq!(ids(resolve_ws(&rows, "coder")), ["ab12", "ab34"]);
        assert!(resolve_ws(&rows, "zz").is_empty());
    }
}
