//! Offload history of the selected session: its `context.jsonl`, tool
//! results and the data blobs they point at, newest first, with time,
//! size and kind. Enter opens one full screen (a context as a
//! conversation whose `workspace:///` links open the blob's metadata).

use ratatui::Frame;
use ratatui::crossterm::event::MouseEvent;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::engine::events::{Event, OffloadKind};
use crate::engine::offload::OffloadItem;
use crate::tui::action::{Effect, PaneEvent};
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
pub const ID: &str = "offload";

/// Columns a name keeps before the age and kind columns give way.
const NAME_MIN: usize = 16;

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum OffloadAction in "offload";
    Open => act("offload.open", ID, "open", &["enter"], false, true),
    Copy => act("offload.copy", ID, "copy path", &["y"], false, false),
    Filter => act("offload.filter", ID, "filter", &["/"], false, true),
    Refresh => act("offload.refresh", ID, "refresh", &["r"], false, false),
    Describe => act("offload.describe", ID, "describe", &["d"], false, false),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = OffloadAction::TABLE;

pub(crate) struct Listed(String, Result<Vec<OffloadItem>, String>);

/// The Offload pane.
pub struct OffloadPane {
    items: Vec<OffloadItem>,
    list: FilteredList,
    job: SingleFlight,
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
            list: FilteredList::default(),
            job: SingleFlight::default(),
            error: None,
            inner: Rect::default(),
        }
    }

    /// Listed items (tests).
    pub fn items(&self) -> &[OffloadItem] {
        &self.items
    }

    fn load(&mut self, cx: &mut Ctx) {
        if self.job.request(()).is_none() {
            return;
        }
        let ws = cx.ws.clone();
        let s = cx.session.clone();
        cx.spawn::<OffloadPane>(async move {
            let r = ws.offload().list(Some(&s)).await.map_err(|e| e.to_string());
            Listed(s, r)
        });
    }

    /// Whether a change at backend path `path` can change the list: a
    /// listed file, or anything in the session's directory or `data/`.
    fn shows(&self, path: &str, cx: &Ctx) -> bool {
        if self.items.iter().any(|o| o.path == path) {
            return true;
        }
        let layout = cx.ws.layout();
        let under = |dir: &str| {
            path.strip_prefix(dir)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        under(&layout.data_dir()) || layout.session_dir(&cx.session).is_ok_and(|d| under(&d))
    }

    fn refilter(&mut self) {
        let items = &self.items;
        self.list
            .refilter(items.len(), |f, i| f.matches(item_name(&items[i])));
    }
}

impl OffloadPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: OffloadAction, cx: &mut Ctx) -> bool {
        let sel = self.list.selected().map(|i| &self.items[i]);
        match action {
            OffloadAction::Nav(verb) => nav(&mut self.list.cursor, verb, self.list.shown.len()),
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
            OffloadAction::Describe => {
                if let Some(o) = sel {
                    let name = o.path.rsplit('/').next().unwrap_or(&o.path);
                    let doc = super::describe::doc("offload", name, o, &[], &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
            }
            OffloadAction::Filter => self.list.filter.begin(),
            OffloadAction::Refresh => self.load(cx),
        }
        true
    }
}

impl Pane for OffloadPane {
    crate::task_pane_glue!(actions: OffloadAction);

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

    crate::filtered_list_input!(list, refilter);

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::SessionChanged => {
                self.items.clear();
                self.list.clear();
                self.load(cx);
            }
            PaneEvent::Engine(env) => {
                if let Event::OffloadWritten { session, .. } = &env.event
                    && (session.is_empty() || *session == cx.session)
                {
                    self.job.want(());
                }
            }
            // Deleted or truncated offload files (by the user, `rm`, a
            // git clean) leave or change the list without a restart: the
            // file watch reports them like the Files pane's changes.
            PaneEvent::File(change) if self.shows(&change.path, cx) => self.job.want(()),
            PaneEvent::Tick if self.job.due() => self.load(cx),
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.list.cursor, ev, self.inner, self.list.shown.len()) {
            ListMouse::Clicked(_, true) => self.act(OffloadAction::Open, cx),
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
        let block = cx.block_for(
            area,
            &format!("{title}{}", filter_suffix(&self.list.filter)),
            &note,
            focused,
        );
        let list = list_frame(f, area, block, &self.list.filter, cx);
        self.inner = list;
        let empty = self.list.shown.is_empty().then_some(if self.job.running() {
            "loading…"
        } else {
            "nothing offloaded in this session"
        });
        if list_placeholder(f, list, self.error.as_deref(), empty, cx) {
            return;
        }
        let now = cx.now_secs();
        let items = &self.items;
        let shown = &self.list.shown;
        let w = list.width as usize;
        render_rows(
            f.buffer_mut(),
            list,
            &mut self.list.cursor,
            shown.len(),
            focused,
            t.selection,
            |i| {
                let o = &items[shown[i]];
                let size = format!(" {:>9}", text::human_size(o.bytes));
                // The name matters most: in a narrow pane the age and kind
                // columns go before it is cut below NAME_MIN columns.
                let mut left = format!(
                    "{:>4} {:<7} ",
                    text::age(o.modified, now),
                    kind_label(o.kind)
                );
                if w < text::width(&left) + text::width(&size) + NAME_MIN {
                    left.clear();
                }
                let room = w.saturating_sub(text::width(&left) + text::width(&size));
                // Cut in the middle: offloads of one session share the
                // `tool_result-call_` head and differ at the end
                // (`…_1.txt`, `…_1(1).txt`).
                let name = text::fit(
                    &text::truncate_middle(&text::display(item_name(o)), room),
                    room,
                );
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
        self.job.done();
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
            self.job.want(());
        }
        if self.job.wanted() {
            self.load(cx);
        }
    }
}
