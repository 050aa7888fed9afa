//! The pane contract: the [`Pane`] trait every component implements, the
//! shared [`Ctx`] it works through, and the helpers every list pane uses
//! (navigation verbs, mouse, the filter bar, the action table macro).
//!
//! Panes (`tui::panes::*`) import this module; it imports no pane
//! and not the app, so the app and the panes never import each other.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::SystemTime;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};
use tokio::sync::mpsc;

use crate::engine::Workspace;
use crate::manager::WorkspaceManager;
use crate::tui::action::{AppMsg, Effect, Level, PaneEvent, TaskResult};
use crate::tui::config::TuiConfig;
use crate::tui::keymap::{ActionSpec, KeyMap};
use crate::tui::theme::Theme;
use crate::tui::widgets::filter::Filter;
use crate::tui::widgets::list::ListCursor;
use crate::tui::widgets::text;

mod macros;

/// Builds the manager of a profile by name (`:profile <name>`): the
/// composition root's factory ([`crate::root::Context::manager_factory`]).
pub type ManagerFactory = crate::root::ManagerFactory;

/// Time a frame spends parsing streamed output at most, by default
/// ([`Ctx::output_time`]): small enough that a key pressed during a flood
/// is answered within the frame (issue 16). Checked between slices, so a
/// frame may run over by one slice.
pub const OUTPUT_FRAME_TIME: std::time::Duration = std::time::Duration::from_millis(4);

/// A clock the panes read "now" from (fixed in snapshot tests).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// What the header shows about the connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HeaderInfo {
    /// Profile name (`local` until the manager brings profiles).
    pub profile: String,
    /// Profile the open workspace belongs to: differs from
    /// [`HeaderInfo::profile`] after `:profile` until a workspace of the
    /// new profile is opened, and the header says so.
    pub ws_profile: String,
    /// The login name. The header shows the workspace's user id instead
    /// (as `wsbench workspaces list` does), since that is what the
    /// manager keys workspaces by.
    pub user: String,
    /// Connection / workspace state text (`ready`, `failed: ...`).
    pub state: String,
    /// When a passing state (`replaced`, `restarted` after a recovery)
    /// goes back to `ready`, on the app's clock; `None` for lasting ones.
    pub state_until: Option<SystemTime>,
}

/// Recent searches kept for the palette ([`Ctx::recent_searches`]).
pub const RECENT_SEARCHES: usize = 20;

/// Shared state every pane sees, and the way back to the app.
pub struct Ctx {
    /// The open workspace.
    pub ws: Arc<Workspace>,
    /// Where spawned tasks report.
    pub tx: mpsc::Sender<AppMsg>,
    /// The selected session (scopes Command, Offload).
    pub session: String,
    /// The agent (selects the skills partition; `""` = default).
    pub agent: String,
    /// The user id workspaces are created for (`--user`; `""` is the
    /// default user), not the display name of the header.
    pub user_id: String,
    /// `--read-only`: no destructive action is offered.
    pub read_only: bool,
    /// Styles.
    pub theme: Theme,
    /// Keys.
    pub keymap: KeyMap,
    /// The `[tui]` config.
    pub config: TuiConfig,
    /// Header facts.
    pub header: HeaderInfo,
    /// "Now".
    pub clock: Clock,
    /// Time a pane may spend per frame parsing streamed output (the
    /// Command pane's flood work); what is left waits for the next frame
    /// ([`Pane::needs_frame`]). The render loop sets it
    /// ([`OUTPUT_FRAME_TIME`] by default); at least one slice of output is
    /// parsed per frame whatever it says, so zero means "one slice".
    pub output_time: std::time::Duration,
    /// Session ids known from the last listing (palette completion).
    pub sessions: Vec<String>,
    /// Workspace ids of the current profile from the last listing
    /// (palette completion, `:ws` suggestions).
    pub workspace_ids: Vec<String>,
    /// `(id, "user/agent · state")` of the last listing, for the
    /// palette's `:ws` completion.
    pub workspace_notes: Vec<(String, String)>,
    /// Profile names (palette completion).
    pub profiles: Vec<String>,
    /// Recent Grep searches as `:grep` arguments, oldest first, at most
    /// [`RECENT_SEARCHES`] (the palette offers them again).
    pub recent_searches: Vec<String>,
    /// Built-in profiles this machine cannot use, with the reason
    /// (`("e2b", "needs E2B_API_KEY")`): shown, not offered, by `:profile`.
    pub unavailable_profiles: Vec<(String, String)>,
    /// The workspace manager of the selected profile (`None` when the
    /// app runs without one, as in most tests): the Workspaces pane and
    /// `:ws` use it.
    pub manager: Option<WorkspaceManager>,
    /// Makes the manager of another profile (`:profile <name>`).
    pub manager_factory: Option<ManagerFactory>,
    /// A workspace to switch the app to once the current effects are
    /// applied (set with [`Ctx::switch_workspace`]).
    pub(crate) pending_ws: Option<Arc<Workspace>>,
    /// Managers replaced by [`Ctx::switch_manager`], for the app to shut
    /// down once the current effects are applied.
    pub(crate) replaced_managers: Vec<WorkspaceManager>,
    pub(crate) effects: Vec<Effect>,
    pub(crate) inflight: Arc<AtomicUsize>,
    /// The workspace generation: bumped by every workspace switch, stamped
    /// on every task result, which the app drops when it no longer
    /// matches.
    pub(crate) generation: u64,
}

impl Ctx {
    /// Remembers a search (`:grep` arguments) for the palette: moved to
    /// the newest place when already there, the oldest dropped past
    /// [`RECENT_SEARCHES`].
    pub fn remember_search(&mut self, args: String) {
        self.recent_searches.retain(|s| s != &args);
        self.recent_searches.push(args);
        let over = self.recent_searches.len().saturating_sub(RECENT_SEARCHES);
        self.recent_searches.drain(..over);
    }

    /// Milliseconds from `since` to now on the app's clock (0 when the
    /// clock went back): how long a search or a walk has run.
    pub fn elapsed_ms(&self, since: SystemTime) -> u64 {
        (self.clock)()
            .duration_since(since)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0)
    }

    /// Queues an effect for the app.
    pub fn effect(&mut self, e: Effect) {
        self.effects.push(e);
    }

    /// Asks the app to reopen every pane on `ws` (the Workspaces pane's
    /// open, `:ws <id>`); done after the current effects.
    pub fn switch_workspace(&mut self, ws: Arc<Workspace>) {
        self.pending_ws = Some(ws);
    }

    /// Makes `manager` the current one (`:profile`). The app shuts the
    /// previous one down after the current effects: at once, or, when the
    /// open workspace is one of its, as soon as the app leaves that
    /// workspace (its other workspaces are closed at once).
    pub fn switch_manager(&mut self, manager: WorkspaceManager) {
        if let Some(old) = self.manager.replace(manager) {
            self.replaced_managers.push(old);
        }
    }

    /// Queues a toast.
    pub fn toast(&mut self, level: Level, msg: impl Into<String>) {
        self.effects.push(Effect::Toast(level, msg.into()));
    }

    /// Seconds since the Unix epoch, from the clock.
    pub fn now_secs(&self) -> f64 {
        (self.clock)()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }

    /// Whether an action is available (bound, and not stripped by
    /// read-only mode).
    pub fn can(&self, action: &str) -> bool {
        self.keymap.has_action(action)
    }

    /// Runs `fut` on the runtime; its output comes back to the pane `P`
    /// as a [`TaskPane::on_msg`] (unless the workspace was switched
    /// meanwhile). Never blocks the caller.
    pub(crate) fn spawn<P: TaskPane>(&self, fut: impl Future<Output = P::Msg> + Send + 'static) {
        let tx = self.tasks::<P>();
        let inflight = self.inflight.clone();
        inflight.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let v = fut.await;
            tx.send(v).await;
            inflight.fetch_sub(1, Ordering::SeqCst);
        });
    }

    /// A sender of results to the pane `P` for a task that reports more
    /// than once (command output, agent events), stamped with the current
    /// workspace generation.
    pub(crate) fn tasks<P: TaskPane>(&self) -> TaskSender<P::Msg> {
        TaskSender {
            tx: self.tx.clone(),
            pane: P::ID,
            generation: self.generation,
            _msg: PhantomData,
        }
    }

    /// Tasks spawned and not yet reported.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// [`Ctx::block`] for a pane drawn in `area`: when title and note do
    /// not both fit on the top border, the note gives way first (cut in
    /// the middle, then dropped), so the pane's name and count stay whole
    /// (`Workspaces (2)`, not `Worksp profile local`); a title that alone
    /// is too wide is cut at its end.
    pub fn block_for<'a>(&self, area: Rect, title: &str, note: &str, focused: bool) -> Block<'a> {
        // Two corners, a space either side of each part, one gap.
        let room = (area.width as usize).saturating_sub(2);
        let tw = text::width(title) + 2;
        let title = if tw > room {
            text::truncate(title, room.saturating_sub(2)).into_owned()
        } else {
            title.to_string()
        };
        let left = room.saturating_sub(text::width(&title) + 2 + 1);
        let note = if text::width(note) + 2 <= left {
            note.to_string()
        } else if left >= 12 {
            text::truncate_middle(note, left - 2)
        } else {
            String::new()
        };
        self.block(&title, &note, focused)
    }

    /// The bordered block of a pane, styled for focus, with `title` and an
    /// optional right-hand note.
    pub fn block<'a>(&self, title: &str, note: &str, focused: bool) -> Block<'a> {
        let t = &self.theme;
        let (bst, tst) = if focused {
            (t.border_focused, t.title_focused)
        } else {
            (t.border, t.title)
        };
        let mut b = Block::default()
            .borders(Borders::ALL)
            .border_type(if focused {
                BorderType::Thick
            } else {
                BorderType::Plain
            })
            .border_style(bst)
            .style(t.base)
            .title(Line::from(Span::styled(format!(" {title} "), tst)));
        if !note.is_empty() {
            b = b.title_top(Line::from(Span::styled(format!(" {note} "), t.muted)).right_aligned());
        }
        b
    }
}

/// Where the tasks of one pane report: typed by the pane's message, and
/// stamped with the workspace generation it was made under.
pub struct TaskSender<M> {
    tx: mpsc::Sender<AppMsg>,
    pane: &'static str,
    generation: u64,
    _msg: PhantomData<fn(M)>,
}

impl<M> Clone for TaskSender<M> {
    fn clone(&self) -> Self {
        TaskSender {
            tx: self.tx.clone(),
            pane: self.pane,
            generation: self.generation,
            _msg: PhantomData,
        }
    }
}

impl<M: Send + 'static> TaskSender<M> {
    /// Sends `msg` to the pane (waits while the channel is full); false
    /// when the app has gone.
    pub async fn send(&self, msg: M) -> bool {
        let r = TaskResult::new(self.pane, self.generation, msg);
        self.tx.send(AppMsg::Task(r)).await.is_ok()
    }
}

/// A pane that runs tasks: the type its tasks report, and where a result
/// goes. [`Ctx::spawn`] takes only futures of [`TaskPane::Msg`], so the
/// pane gets back exactly what it spawned, moved.
pub(crate) trait TaskPane: Pane + Sized + 'static {
    /// The pane id results are routed to.
    const ID: &'static str;
    /// What its tasks report.
    type Msg: Send + 'static;
    /// One result of its tasks (of the current workspace).
    fn on_msg(&mut self, msg: Self::Msg, cx: &mut Ctx);
}

/// Hands a task result to the pane it was spawned for (what a
/// [`TaskPane`]'s [`Pane::on_task`] does).
pub(crate) fn deliver<P: TaskPane>(pane: &mut P, task: TaskResult, cx: &mut Ctx) {
    if let Some(msg) = task.take::<P::Msg>() {
        pane.on_msg(msg, cx);
    }
}

/// A component of the screen.
pub trait Pane: Send {
    /// Stable id: the focus target, the keymap context, the task route.
    fn id(&self) -> &'static str;

    /// Title shown on the border (and in the zoom / small-screen tab).
    fn title(&self) -> String;

    /// The keymap context in force now (a pane with modes may switch, e.g.
    /// the Command pane's prompt). Defaults to the id.
    fn context(&self) -> &'static str {
        self.id()
    }

    /// Starts loading (called once the app is built).
    fn init(&mut self, _cx: &mut Ctx) {}

    /// True while a text field of this pane has the keyboard: raw keys go
    /// to [`Pane::on_key`] before any binding except the focus keys.
    fn text_input_active(&self) -> bool {
        false
    }

    /// Whether the footer leaves out `action` now because it would do
    /// nothing (the viewer's link keys on a document without links). The
    /// key still works; help still lists it.
    fn hint_off(&self, _action: &str) -> bool {
        false
    }

    /// The pane lost the focus (another pane was focused, the workspace
    /// was switched under it): it leaves any typing mode. The one rule for
    /// every pane: focus keys (`1`…`9`, `0`, Tab, `A`, a click) focus a
    /// pane, and only the pane's own key (`i`, Enter, `/`) starts typing;
    /// a pane never keeps the keyboard from an earlier visit.
    fn blur(&mut self) {}

    /// Esc on the pane outside any text field: drop an applied `/` filter
    /// (issue 22). True when there was one to clear.
    fn clear_filter(&mut self) -> bool {
        false
    }

    /// A raw key while [`Pane::text_input_active`]; true if consumed.
    fn on_key(&mut self, _key: &KeyEvent, _cx: &mut Ctx) -> bool {
        false
    }

    /// Bracketed paste into the focused text field; true if taken. A
    /// pasted newline never submits anything (C23).
    fn on_paste(&mut self, _text: &str, _cx: &mut Ctx) -> bool {
        false
    }

    /// A bound action of this pane's context; true if handled.
    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool;

    /// What still runs in the pane (a command, an agent) that quitting
    /// would cut short, as a short phrase; `None` when idle.
    fn busy(&self) -> Option<String> {
        None
    }

    /// Asks what runs in the pane to stop because the app is quitting; the
    /// pane stays [`Pane::busy`] until the work has really ended (so the
    /// app can wait for journal entries to be written).
    fn shutdown(&mut self, _cx: &mut Ctx) {}

    /// Something happened.
    fn on_event(&mut self, _ev: &PaneEvent<'_>, _cx: &mut Ctx) {}

    /// The result of a task this pane spawned, from the current workspace
    /// (a [`TaskPane`] passes it to [`deliver`]).
    fn on_task(&mut self, _task: TaskResult, _cx: &mut Ctx) {}

    /// A mouse event inside `area` (the pane's last drawn area); true if
    /// handled.
    fn on_mouse(&mut self, _ev: &MouseEvent, _area: Rect, _cx: &mut Ctx) -> bool {
        false
    }

    /// Whether the pane left work its last draw had no time for (output
    /// deferred by a frame's time budget) and wants the next frame even
    /// if no message comes; asked of the panes on screen only.
    fn needs_frame(&self) -> bool {
        false
    }

    /// Draws the pane into `area` (border included).
    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx);

    /// Where the terminal cursor goes when focused (text fields).
    fn cursor(&self) -> Option<(u16, u16)> {
        None
    }

    /// The concrete pane, for tests and for code that knows the type
    /// (`app.pane_mut("files")` then `downcast_mut::<FilesPane>()`).
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

/// A one-line message centred in `area` (empty and loading states).
pub fn placeholder(f: &mut Frame<'_>, area: Rect, text: &str, style: Style) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let y = area.y + area.height.saturating_sub(1) / 2;
    let t = crate::tui::widgets::text::truncate(text, area.width as usize);
    let w = crate::tui::widgets::text::width(&t) as u16;
    let x = area.x + area.width.saturating_sub(w) / 2;
    f.buffer_mut().set_string(x, y, &t, style);
}

/// A list navigation verb: the six entries
/// [`pane_actions!`](crate::pane_actions) adds to every list pane's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    /// One row down (`j`).
    Down,
    /// One row up (`k`).
    Up,
    /// One page down (PageDown).
    PageDown,
    /// One page up (PageUp).
    PageUp,
    /// Half a page down (`ctrl-d`, as vim and less).
    HalfDown,
    /// Half a page up (`ctrl-u`).
    HalfUp,
    /// The first row (`g`).
    Top,
    /// The last row (`G`).
    Bottom,
}

impl Nav {
    /// The signed rows a paging verb moves when a page is `page` rows
    /// (at least 1): ±`page` for PageDown/PageUp, ±half of it (at least
    /// 1) for HalfDown/HalfUp; `None` for the other verbs.
    pub fn page_rows(self, page: usize) -> Option<isize> {
        let page = page.max(1) as isize;
        let half = (page / 2).max(1);
        match self {
            Nav::PageDown => Some(page),
            Nav::PageUp => Some(-page),
            Nav::HalfDown => Some(half),
            Nav::HalfUp => Some(-half),
            _ => None,
        }
    }
}

/// Applies a navigation verb to a list of `len` rows.
pub fn nav(cursor: &mut ListCursor, verb: Nav, len: usize) {
    match verb {
        Nav::Down => cursor.step(1, len),
        Nav::Up => cursor.step(-1, len),
        Nav::PageDown => cursor.page(1, len),
        Nav::PageUp => cursor.page(-1, len),
        Nav::HalfDown | Nav::HalfUp => {
            let rows = verb.page_rows(cursor.height).unwrap_or(0);
            cursor.step(rows, len)
        }
        Nav::Top => cursor.top(),
        Nav::Bottom => cursor.bottom(len),
    }
}

/// The wheel as a navigation verb (up or down), for panes that scroll
/// through their own actions; `None` for other mouse events.
pub fn wheel_nav(ev: &MouseEvent) -> Option<Nav> {
    use ratatui::crossterm::event::MouseEventKind;
    match ev.kind {
        MouseEventKind::ScrollUp => Some(Nav::Up),
        MouseEventKind::ScrollDown => Some(Nav::Down),
        _ => None,
    }
}

/// An action spec of a pane (`context` = the pane id).
pub const fn act(
    name: &'static str,
    context: &'static str,
    desc: &'static str,
    keys: &'static [&'static str],
    dangerous: bool,
    hint: bool,
) -> ActionSpec {
    ActionSpec {
        name,
        context,
        desc,
        keys,
        dangerous,
        hint,
    }
}

/// What a mouse event did to a list drawn in `inner`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMouse {
    /// Nothing.
    None,
    /// The wheel scrolled it.
    Scrolled,
    /// A row was clicked (and selected); true when it was already
    /// selected (a second click opens).
    Clicked(usize, bool),
}

/// Mouse handling shared by lists: the wheel scrolls, a click selects.
pub fn list_mouse(cursor: &mut ListCursor, ev: &MouseEvent, inner: Rect, len: usize) -> ListMouse {
    use ratatui::crossterm::event::{MouseButton, MouseEventKind};
    match ev.kind {
        MouseEventKind::ScrollDown => {
            cursor.scroll(3, len);
            ListMouse::Scrolled
        }
        MouseEventKind::ScrollUp => {
            cursor.scroll(-3, len);
            ListMouse::Scrolled
        }
        MouseEventKind::Down(MouseButton::Left) => {
            if ev.column < inner.x || ev.column >= inner.x + inner.width {
                return ListMouse::None;
            }
            match cursor.row_at(ev.row, inner.y, len) {
                Some(i) if ev.row < inner.y + inner.height => {
                    let again = cursor.selected == i;
                    cursor.selected = i;
                    ListMouse::Clicked(i, again)
                }
                _ => ListMouse::None,
            }
        }
        _ => ListMouse::None,
    }
}

/// Draws the filter bar on the last row of `inner` when a filter is set
/// or being edited; returns the rows left for the list.
pub fn filter_bar(f: &mut Frame<'_>, inner: Rect, filter: &Filter, cx: &Ctx) -> Rect {
    if !(filter.editing || filter.active()) || inner.height < 2 {
        return inner;
    }
    let bar = Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1);
    let label = text::truncate_left(&filter.label(), inner.width as usize).into_owned();
    f.buffer_mut()
        .set_string(bar.x, bar.y, label, cx.theme.accent);
    Rect::new(inner.x, inner.y, inner.width, inner.height - 1)
}

/// Draws a list pane's `block` and its filter bar in `area`; returns the
/// rect its rows go in (the one its mouse handler reads too).
pub fn list_frame(
    f: &mut Frame<'_>,
    area: Rect,
    block: Block<'_>,
    filter: &Filter,
    cx: &Ctx,
) -> Rect {
    let inner = block.inner(area);
    f.render_widget(block, area);
    filter_bar(f, inner, filter, cx)
}

/// What a pane adds to its title for an applied (not being typed)
/// filter: ` /text`, cut at [`FILTER_TITLE_CHARS`], until Esc clears it
/// (issue 22); empty otherwise. Part of the title, so the border's note
/// gives way first (see [`Ctx::block_for`]) and the bar under the list,
/// hidden in short panes, is not the only place it shows.
pub fn filter_suffix(filter: &Filter) -> String {
    if filter.active() && !filter.editing {
        format!(" {}", text::truncate(&filter.label(), FILTER_TITLE_CHARS))
    } else {
        String::new()
    }
}

/// Widest filter shown in a pane title, in columns (longer ones end with
/// `…`; the bar under the list shows the whole text).
const FILTER_TITLE_CHARS: usize = 24;

/// What a list pane draws instead of rows: `error: …` when its last load
/// failed, else `empty` (the caller's "loading…" or "no …") when no row
/// is shown. True when it drew one, and the caller then draws no rows.
pub fn list_placeholder(
    f: &mut Frame<'_>,
    list: Rect,
    error: Option<&str>,
    empty: Option<&str>,
    cx: &Ctx,
) -> bool {
    if let Some(e) = error {
        placeholder(f, list, &format!("error: {e}"), cx.theme.error);
    } else if let Some(msg) = empty {
        placeholder(f, list, msg, cx.theme.muted);
    } else {
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::Nav;

    const ID: &str = "demo";

    crate::pane_action_enum! {
        /// A table for the macro's own test.
        enum DemoAction in "demo";
        Open => act("demo.open", ID, "open", &["enter"], false, true),
        CopyPath => act("demo.copy_path", ID, "copy path", &["y"], false, false),
    }

    /// Every table entry parses to one variant, in table order, and
    /// nothing else parses: the enum and the table cannot drift apart.
    #[test]
    fn every_table_entry_parses_to_its_own_variant() {
        let parsed: Vec<_> = DemoAction::TABLE
            .iter()
            .map(|a| DemoAction::parse(a.name))
            .collect();
        assert_eq!(
            parsed,
            [
                Some(DemoAction::Open),
                Some(DemoAction::CopyPath),
                Some(DemoAction::Nav(Nav::Down)),
                Some(DemoAction::Nav(Nav::Up)),
                Some(DemoAction::Nav(Nav::PageDown)),
                Some(DemoAction::Nav(Nav::PageUp)),
                Some(DemoAction::Nav(Nav::HalfDown)),
                Some(DemoAction::Nav(Nav::HalfUp)),
                Some(DemoAction::Nav(Nav::Top)),
                Some(DemoAction::Nav(Nav::Bottom)),
            ]
        );
        assert_eq!(DemoAction::TABLE[1].desc, "copy path");
        assert_eq!(DemoAction::parse("demo"), None);
        assert_eq!(DemoAction::parse("open"), None);
        assert_eq!(DemoAction::parse("other.open"), None);
    }

    crate::pane_action_enum! {
        /// A table without list movement (the second form).
        enum PlainAction in "plain", no nav;
        Save => act("plain.save", "plain", "save", &["ctrl-s"], true, true),
        Close => act("plain.close", "plain", "close", &["esc"], false, true),
    }

    /// The second form declares exactly the listed entries: no
    /// navigation entries in the table, none parsed.
    #[test]
    fn the_no_nav_form_has_only_its_own_entries() {
        let names: Vec<_> = PlainAction::TABLE.iter().map(|a| a.name).collect();
        assert_eq!(names, ["plain.save", "plain.close"]);
        assert!(PlainAction::TABLE[0].dangerous);
        assert_eq!(PlainAction::parse("plain.save"), Some(PlainAction::Save));
        assert_eq!(PlainAction::parse("plain.close"), Some(PlainAction::Close));
        assert_eq!(PlainAction::parse("plain.down"), None);
    }

    /// The wheel is the one mouse event that maps to a list verb.
    #[test]
    fn wheel_nav_maps_the_wheel_only() {
        use ratatui::crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
        let ev = |kind| MouseEvent {
            kind,
            column: 0,
            row: 0,
            modifiers: KeyModifiers::NONE,
        };
        assert_eq!(
            super::wheel_nav(&ev(MouseEventKind::ScrollUp)),
            Some(Nav::Up)
        );
        assert_eq!(
            super::wheel_nav(&ev(MouseEventKind::ScrollDown)),
            Some(Nav::Down)
        );
        assert_eq!(
            super::wheel_nav(&ev(MouseEventKind::Down(MouseButton::Left))),
            None
        );
    }
}
