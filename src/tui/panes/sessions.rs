//! Sessions of the open workspace (from `sessions/` and the journals):
//! last activity, tool calls, offload count. Enter selects one, which
//! scopes the Command and Offload panes.

use ratatui::Frame;
use ratatui::crossterm::event::MouseEvent;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::engine::events::Event;
use crate::engine::sessions::SessionSummary;
use crate::tui::action::{Effect, Level, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::filter_suffix;
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, list_frame, list_mouse, list_placeholder, nav,
};
use crate::tui::widgets::filtered::FilteredList;
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::single_flight::SingleFlight;
use crate::tui::widgets::text;

/// Pane id.
pub const ID: &str = "sessions";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum SessionsAction in "sessions";
    Select => act("sessions.select", ID, "select session", &["enter", "space"], false, true),
    Filter => act("sessions.filter", ID, "filter", &["/"], false, true),
    Refresh => act("sessions.refresh", ID, "refresh", &["r"], false, true),
    Describe => act("sessions.describe", ID, "describe", &["d"], false, false),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = SessionsAction::TABLE;

/// The Sessions pane.
pub struct SessionsPane {
    items: Vec<SessionSummary>,
    list: FilteredList,
    job: SingleFlight,
    error: Option<String>,
    inner: Rect,
}

pub(crate) struct Loaded(pub(crate) Result<Vec<SessionSummary>, String>);

impl Default for SessionsPane {
    fn default() -> Self {
        Self::new()
    }
}

impl SessionsPane {
    /// An empty pane (loads on init).
    pub fn new() -> Self {
        SessionsPane {
            items: Vec::new(),
            list: FilteredList::default(),
            job: SingleFlight::default(),
            error: None,
            inner: Rect::default(),
        }
    }

    fn load(&mut self, cx: &mut Ctx) {
        if self.job.request(()).is_none() {
            return;
        }
        let ws = cx.ws.clone();
        cx.spawn::<SessionsPane>(async move {
            Loaded(ws.sessions().list().await.map_err(|e| e.to_string()))
        });
    }

    fn refilter(&mut self) {
        let items = &self.items;
        self.list
            .refilter(items.len(), |f, i| f.matches(&items[i].id));
    }

    fn selected(&self) -> Option<&SessionSummary> {
        self.list.selected().map(|i| &self.items[i])
    }

    /// The listed sessions (tests).
    pub fn items(&self) -> &[SessionSummary] {
        &self.items
    }
}

impl SessionsPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: SessionsAction, cx: &mut Ctx) -> bool {
        match action {
            SessionsAction::Nav(verb) => {
                nav(&mut self.list.cursor, verb, self.list.shown.len());
            }
            SessionsAction::Select => {
                if let Some(s) = self.selected() {
                    cx.effect(Effect::SelectSession(s.id.clone()));
                }
            }
            SessionsAction::Describe => {
                if let Some(s) = self.selected() {
                    let paths = super::describe::session_paths(cx.ws.layout(), &s.id);
                    let doc = super::describe::doc("session", &s.id, s, &paths, &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
            }
            SessionsAction::Filter => self.list.filter.begin(),
            SessionsAction::Refresh => self.load(cx),
        }
        true
    }
}

impl Pane for SessionsPane {
    crate::task_pane_glue!(actions: SessionsAction);

    fn title(&self) -> String {
        format!("Sessions ({})", self.items.len())
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.load(cx);
    }

    crate::filtered_list_input!(list, refilter);

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Engine(env) => {
                if matches!(
                    env.event,
                    Event::ToolFinished { .. } | Event::OffloadWritten { .. }
                ) {
                    self.job.want(());
                }
            }
            PaneEvent::SessionChanged => self.load(cx),
            PaneEvent::Tick if self.job.due() => self.load(cx),
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.list.cursor, ev, self.inner, self.list.shown.len()) {
            ListMouse::Clicked(_, true) => self.act(SessionsAction::Select, cx),
            ListMouse::None => false,
            _ => true,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        // The row's `1c 3o`: tool calls / offloaded files of the session
        // (data blobs are not the session's files; the Offload pane
        // counts them apart).
        let note = if self.job.running() {
            "loading…"
        } else {
            "calls/offloads"
        };
        let block = cx.block_for(
            area,
            &format!("{}{}", self.title(), filter_suffix(&self.list.filter)),
            note,
            focused,
        );
        let list = list_frame(f, area, block, &self.list.filter, cx);
        self.inner = list;
        let empty = self.list.shown.is_empty().then_some(if self.job.running() {
            "loading…"
        } else {
            "no sessions"
        });
        if list_placeholder(f, list, self.error.as_deref(), empty, cx) {
            return;
        }
        let now = cx.now_secs();
        let w = list.width as usize;
        let rows: Vec<(String, String, bool)> = self
            .list
            .shown
            .iter()
            .map(|&i| {
                let s = &self.items[i];
                let right = format!(
                    "{}c {}o {:>4}",
                    s.tool_calls,
                    s.offloads,
                    text::age(s.last_activity, now)
                );
                (s.id.clone(), right, s.id == cx.session)
            })
            .collect();
        render_rows(
            f.buffer_mut(),
            list,
            &mut self.list.cursor,
            rows.len(),
            focused,
            t.selection,
            |i| {
                let (id, right, current) = &rows[i];
                let mark = if *current { "● " } else { "  " };
                let rw = text::width(right) + 1;
                let id_w = w.saturating_sub(rw + 2);
                // Cut in the middle: generated ids share long prefixes.
                let name = text::fit(&text::truncate_middle(&text::display(id), id_w), id_w);
                let id_style = if *current { t.accent } else { t.base };
                Line::from(vec![
                    Span::styled(mark, t.accent),
                    Span::styled(name, id_style),
                    Span::styled(format!(" {right}"), t.muted),
                ])
            },
        );
    }
}

impl TaskPane for SessionsPane {
    const ID: &'static str = ID;
    type Msg = Loaded;

    fn on_msg(&mut self, msg: Loaded, cx: &mut Ctx) {
        let Loaded(r) = &msg;
        self.job.done();
        match r {
            Ok(items) => {
                self.items = items.clone();
                self.error = None;
                // The selected session is listed even before its
                // directory exists.
                if !self.items.iter().any(|s| s.id == cx.session) {
                    self.items.push(SessionSummary {
                        id: cx.session.clone(),
                        last_activity: None,
                        tool_calls: 0,
                        offloads: 0,
                        context_bytes: 0,
                    });
                }
                cx.sessions = self.items.iter().map(|s| s.id.clone()).collect();
            }
            Err(e) => {
                self.error = Some(e.clone());
                cx.toast(Level::Error, format!("listing sessions: {e}"));
            }
        }
        self.refilter();
        if self.job.wanted() {
            self.load(cx);
        }
    }
}
