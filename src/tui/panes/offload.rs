//! Offload history of the selected session: its `context.jsonl`, tool
//! results and the data blobs they point at, newest first, with time,
//! size and kind. Enter opens one full screen (a context as a
//! conversation whose `workspace:///` links open the blob's metadata).

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::engine::events::{Event, OffloadKind};
use crate::engine::offload::OffloadItem;
use crate::tui::action::{Effect, PaneEvent, TaskResult};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, deliver, filter_bar, list_mouse, nav, placeholder,
};
use crate::tui::widgets::filter::{Filter, FilterOutcome};
use crate::tui::widgets::list::{ListCursor, render_rows};
use crate::tui::widgets::text;

/// Pane id.
pub const ID: &str = "offload";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum OffloadAction in "offload";
    Open => act("offload.open", ID, "open", &["enter"], false, true),
    Copy => act("offload.copy", ID, "copy path", &["y"], false, false),
    Filter => act("offload.filter", ID, "filter", &["/"], false, true),
    Refresh => act("offload.refresh", ID, "refresh", &["r"], false, false),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = OffloadAction::TABLE;

pub(crate) struct Listed(String, Result<Vec<OffloadItem>, String>);

/// The Offload pane.
pub struct OffloadPane {
    items: Vec<OffloadItem>,
    shown: Vec<usize>,
    cursor: ListCursor,
    filter: Filter,
    loading: bool,
    dirty: bool,
    error: Option<String>,
    inner: Rect,
}

impl Default for OffloadPane {
    fn default() -> Self {
        Self::new()
    }
}

fn kind_label(k: OffloadKind) -> &'static str {
    match k {
        OffloadKind::Context => "context",
        OffloadKind::ToolResult => "result",
        OffloadKind::Data => "data",
    }
}

fn item_name(o: &OffloadItem) -> &str {
    o.path.rsplit('/').next().unwrap_or(&o.path)
}

impl OffloadPane {
    /// An empty pane (loads on init).
    pub fn new() -> Self {
        OffloadPane {
            items: Vec::new(),
            shown: Vec::new(),
            cursor: ListCursor::default(),
            filter: Filter::default(),
            loading: false,
            dirty: false,
            error: None,
            inner: Rect::default(),
        }
    }

    /// Listed items (tests).
    pub fn items(&self) -> &[OffloadItem] {
        &self.items
    }

    fn load(&mut self, cx: &mut Ctx) {
        if self.loading {
            self.dirty = true;
            return;
        }
        self.loading = true;
        self.dirty = false;
        let ws = cx.ws.clone();
        let s = cx.session.clone();
        cx.spawn::<OffloadPane>(async move {
            let r = ws.offload().list(Some(&s)).await.map_err(|e| e.to_string());
            Listed(s, r)
        });
    }

    fn refilter(&mut self) {
        self.shown = (0..self.items.len())
            .filter(|&i| self.filter.matches(item_name(&self.items[i])))
            .collect();
        self.cursor.clamp(self.shown.len());
    }
}

impl Pane for OffloadPane {
    fn id(&self) -> &'static str {
        ID
    }

    fn on_task(&mut self, task: TaskResult, cx: &mut Ctx) {
        deliver(self, task, cx);
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }

    /// `Offload (3)`, or `Offload (3 + 1 data)` when data blobs are
    /// listed: the first number is what the Sessions pane's `o` column
    /// counts (the session's own files), the blobs live in `data/`.
    fn title(&self) -> String {
        let data = self
            .items
            .iter()
            .filter(|i| i.kind == OffloadKind::Data)
            .count();
        let own = self.items.len() - data;
        if data == 0 {
            format!("Offload ({own})")
        } else {
            format!("Offload ({own} + {data} data)")
        }
    }

    fn init(&mut self, cx: &mut Ctx) {
        self.load(cx);
    }

    fn text_input_active(&self) -> bool {
        self.filter.editing
    }

    fn blur(&mut self) {
        // The filter typed so far stays applied, as after Enter.
        self.filter.editing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, _cx: &mut Ctx) -> bool {
        match self.filter.key(key) {
            FilterOutcome::Ignored => false,
            _ => {
                self.refilter();
                true
            }
        }
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        let used = self.filter.paste(s) != FilterOutcome::Ignored;
        self.refilter();
        used
    }

    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool {
        let Some(action) = OffloadAction::parse(action) else {
            return false;
        };
        let sel = self
            .shown
            .get(self.cursor.selected)
            .map(|&i| &self.items[i]);
        match action {
            OffloadAction::Nav(verb) => nav(&mut self.cursor, verb, self.shown.len()),
            OffloadAction::Open => {
                if let Some(o) = sel {
                    cx.effect(Effect::OpenLink(o.path.clone()));
                }
            }
            OffloadAction::Copy => {
                if let Some(o) = sel {
                    cx.effect(Effect::Copy(
                        o.url.clone().unwrap_or_else(|| o.path.clone()),
                    ));
                }
            }
            OffloadAction::Filter => self.filter.begin(),
            OffloadAction::Refresh => self.load(cx),
        }
        true
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::SessionChanged => {
                self.items.clear();
                self.shown.clear();
                self.cursor = ListCursor::default();
                self.load(cx);
            }
            PaneEvent::Engine(env) => {
                if let Event::OffloadWritten { session, .. } = &env.event
                    && (session.is_empty() || *session == cx.session)
                {
                    self.dirty = true;
                }
            }
            PaneEvent::Tick if self.dirty && !self.loading => self.load(cx),
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.cursor, ev, self.inner, self.shown.len()) {
            ListMouse::Clicked(_, true) => self.on_action("offload.open", cx),
            ListMouse::None => false,
            _ => true,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let title = self.title();
        // The data split lengthens the title: where `session s-001` no
        // longer fits beside it, the bare id still says which session.
        let full = format!("session {}", cx.session);
        let left = (area.width as usize).saturating_sub(2 + text::width(&title) + 2 + 1);
        let note = if text::width(&full) + 2 <= left {
            full
        } else {
            cx.session.clone()
        };
        let block = cx.block_for(area, &title, &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        let list = filter_bar(f, inner, &self.filter, cx);
        self.inner = list;
        if let Some(e) = &self.error {
            placeholder(f, list, &format!("error: {e}"), t.error);
            return;
        }
        if self.shown.is_empty() {
            let msg = if self.loading {
                "loading…"
            } else {
                "nothing offloaded in this session"
            };
            placeholder(f, list, msg, t.muted);
            return;
        }
        let now = cx.now_secs();
        let items = &self.items;
        let shown = &self.shown;
        let w = list.width as usize;
        render_rows(
            f.buffer_mut(),
            list,
            &mut self.cursor,
            shown.len(),
            focused,
            t.selection,
            |i| {
                let o = &items[shown[i]];
                let left = format!(
                    "{:>4} {:<7} ",
                    text::age(o.modified, now),
                    kind_label(o.kind)
                );
                let size = format!(" {:>9}", text::human_size(o.bytes));
                let room = w.saturating_sub(text::width(&left) + text::width(&size));
                let name = text::fit(&text::display(item_name(o)), room);
                let kstyle = match o.kind {
                    OffloadKind::Context => t.accent,
                    OffloadKind::ToolResult => t.base,
                    OffloadKind::Data => t.binary,
                };
                Line::from(vec![
                    Span::styled(left, t.muted),
                    Span::styled(name, kstyle),
                    Span::styled(size, t.muted),
                ])
            },
        );
    }
}

impl TaskPane for OffloadPane {
    const ID: &'static str = ID;
    type Msg = Listed;

    fn on_msg(&mut self, msg: Listed, cx: &mut Ctx) {
        let Listed(session, r) = &msg;
        self.loading = false;
        if *session == cx.session {
            match r {
                Ok(items) => {
                    let mut items = items.clone();
                    items.sort_by(|a, b| {
                        b.modified
                            .partial_cmp(&a.modified)
                            .unwrap_or(std::cmp::Ordering::Equal)
                            .then_with(|| a.path.cmp(&b.path))
                    });
                    self.items = items;
                    self.error = None;
                }
                Err(e) => self.error = Some(e.clone()),
            }
            self.refilter();
        } else {
            self.dirty = true;
        }
        if self.dirty {
            self.load(cx);
        }
    }
}
