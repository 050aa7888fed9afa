//! Skills of the agent's partition: valid ones with their description,
//! invalid ones with the reason (and hint). Enter shows `SKILL.md`
//! rendered; `a` adds one from a host directory or archive, `D` removes
//! one after asking.

use ratatui::Frame;
use ratatui::crossterm::event::MouseEvent;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};

use crate::engine::events::Event;
use crate::engine::skills::{ArchiveFormat, InvalidSkill, Skill, SkillListing};
use crate::tui::action::{DialogTag, Doc, Effect, Level, PaneEvent};
use crate::tui::keymap::ActionSpec;
use crate::tui::pane::filter_suffix;
use crate::tui::pane::{
    Ctx, ListMouse, Pane, TaskPane, list_frame, list_mouse, list_placeholder, nav,
};
use crate::tui::theme::Theme;
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::filtered::FilteredList;
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::single_flight::SingleFlight;
use crate::tui::widgets::text;

/// Pane id.
pub const ID: &str = "skills";

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum SkillsAction in "skills";
    View => act("skills.view", ID, "view SKILL.md", &["enter"], false, true),
    Add => act("skills.add", ID, "add from host", &["a"], true, true),
    Remove => act("skills.remove", ID, "remove", &["D", "delete"], true, true),
    Filter => act("skills.filter", ID, "filter", &["/"], false, true),
    Refresh => act("skills.refresh", ID, "refresh", &["r"], false, false),
    Describe => act("skills.describe", ID, "describe", &["d"], false, false),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = SkillsAction::TABLE;

enum Row {
    Valid(Skill),
    Invalid(InvalidSkill),
}

impl Row {
    fn name(&self) -> String {
        match self {
            Row::Valid(s) => s.name.clone(),
            Row::Invalid(i) => i.dir.rsplit('/').next().unwrap_or("").to_string(),
        }
    }
}

pub(crate) enum Msg {
    Listed(Result<SkillListing, String>),
    Done(Result<String, String>),
}

/// The Skills pane.
pub struct SkillsPane {
    rows: Vec<Row>,
    list: FilteredList,
    job: SingleFlight,
    error: Option<String>,
    partition: String,
    inner: Rect,
}

impl Default for SkillsPane {
    fn default() -> Self {
        Self::new()
    }
}

/// `SKILL.md` rendered for the viewer: headings bold, fenced code muted,
/// bullets as `•`.
pub fn markdown_doc(title: &str, header: &[(String, String)], md: &str, t: &Theme) -> Doc {
    let mut lines = Vec::new();
    for (k, v) in header {
        let mut l = StyledLine::plain(&format!("{k:<12}"), t.muted);
        let start = l.text.len() as u32;
        l.text.push_str(&text::display(v));
        l.runs.push((start, t.base));
        lines.push(l);
    }
    if !header.is_empty() {
        lines.push(StyledLine::default());
    }
    let mut code = false;
    for raw in md.lines() {
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") {
            code = !code;
            lines.push(StyledLine::plain(raw, t.muted));
            continue;
        }
        let l = if code {
            StyledLine::plain(&format!("  {raw}"), t.accent)
        } else if let Some(h) = trimmed.strip_prefix('#') {
            let h = h.trim_start_matches('#').trim();
            StyledLine::plain(h, t.title_focused.add_modifier(Modifier::BOLD))
        } else if let Some(b) = trimmed
            .strip_prefix("- ")
            .or_else(|| trimmed.strip_prefix("* "))
        {
            let indent = raw.len() - trimmed.len();
            StyledLine::plain(&format!("{}• {b}", " ".repeat(indent)), t.base)
        } else {
            StyledLine::plain(raw, t.base)
        };
        lines.push(l);
    }
    Doc {
        title: title.to_string(),
        lines,
        links: Vec::new(),
    }
}

impl SkillsPane {
    /// An empty pane (loads on init).
    pub fn new() -> Self {
        SkillsPane {
            rows: Vec::new(),
            list: FilteredList::default(),
            job: SingleFlight::default(),
            error: None,
            partition: String::new(),
            inner: Rect::default(),
        }
    }

    fn load(&mut self, cx: &mut Ctx) {
        if self.job.request(()).is_none() {
            return;
        }
        let ws = cx.ws.clone();
        let agent = cx.agent.clone();
        cx.spawn::<SkillsPane>(async move {
            Msg::Listed(ws.skills().list(&agent).await.map_err(|e| e.to_string()))
        });
    }

    fn refilter(&mut self) {
        let rows = &self.rows;
        self.list.refilter(rows.len(), |f, i| {
            let r = &rows[i];
            let desc = match r {
                Row::Valid(s) => s.description.as_str(),
                Row::Invalid(i) => i.reason.as_str(),
            };
            f.matches(&r.name()) || f.matches(desc)
        });
    }

    fn selected(&self) -> Option<&Row> {
        self.list.selected().map(|i| &self.rows[i])
    }
}

impl SkillsPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: SkillsAction, cx: &mut Ctx) -> bool {
        match action {
            SkillsAction::Nav(verb) => {
                nav(&mut self.list.cursor, verb, self.list.shown.len());
            }
            SkillsAction::View => match self.selected() {
                Some(Row::Valid(s)) => {
                    let header = vec![
                        ("name".to_string(), s.name.clone()),
                        ("description".to_string(), s.description.clone()),
                        ("directory".to_string(), s.dir.clone()),
                    ];
                    let doc = markdown_doc(
                        &format!("{}/SKILL.md", s.dir),
                        &header,
                        &s.markdown,
                        &cx.theme,
                    );
                    cx.effect(Effect::OpenViewer(doc));
                }
                Some(Row::Invalid(i)) => {
                    let mut header = vec![
                        ("INVALID".to_string(), i.describe()),
                        ("file".to_string(), i.path.clone()),
                    ];
                    if let Some(l) = i.line {
                        header.push(("line".to_string(), l.to_string()));
                    }
                    let doc = markdown_doc(&i.path, &header, "", &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
                None => {}
            },
            SkillsAction::Describe => match self.selected() {
                Some(Row::Valid(s)) => {
                    // The markdown is what Enter shows: here only its size.
                    let mut v = serde_json::to_value(s).unwrap_or_default();
                    if let Some(m) = v.as_object_mut() {
                        m.insert(
                            "markdown".into(),
                            format!(
                                "{} (enter views it)",
                                text::human_size(s.markdown.len() as u64)
                            )
                            .into(),
                        );
                    }
                    let paths = [("SKILL.md", format!("{}/SKILL.md", s.dir))];
                    let doc = super::describe::doc("skill", &s.name, &v, &paths, &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
                Some(r @ Row::Invalid(i)) => {
                    let doc = super::describe::doc("invalid skill", &r.name(), i, &[], &cx.theme);
                    cx.effect(Effect::OpenViewer(doc));
                }
                None => {}
            },
            SkillsAction::Add => cx.effect(Effect::Prompt {
                pane: ID,
                title: "Add a skill: host directory or .zip/.tar/.tar.gz".into(),
                initial: String::new(),
                tag: DialogTag::SkillAdd,
            }),
            SkillsAction::Remove => {
                if let Some(r) = self.selected() {
                    let name = r.name();
                    cx.effect(Effect::Confirm {
                        pane: ID,
                        message: format!(
                            "Remove skill {name} from {}?",
                            text::display(&self.partition)
                        ),
                        tag: DialogTag::SkillRemove { name },
                    });
                }
            }
            SkillsAction::Filter => self.list.filter.begin(),
            SkillsAction::Refresh => self.load(cx),
        }
        true
    }
}

impl Pane for SkillsPane {
    crate::task_pane_glue!(actions: SkillsAction);

    fn title(&self) -> String {
        let bad = self
            .rows
            .iter()
            .filter(|r| matches!(r, Row::Invalid(_)))
            .count();
        if bad > 0 {
            format!("Skills ({}, {bad} invalid)", self.rows.len() - bad)
        } else {
            format!("Skills ({})", self.rows.len())
        }
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
                    Event::SkillAdded { .. } | Event::SkillRemoved { .. }
                ) {
                    self.load(cx);
                }
            }
            PaneEvent::Confirmed(DialogTag::SkillRemove { name }) => {
                let ws = cx.ws.clone();
                let agent = cx.agent.clone();
                let name = name.clone();
                cx.spawn::<SkillsPane>(async move {
                    Msg::Done(
                        ws.skills()
                            .remove(&name, &agent)
                            .await
                            .map(|_| format!("removed skill {name}"))
                            .map_err(|e| e.to_string()),
                    )
                });
            }
            PaneEvent::Input {
                tag: DialogTag::SkillAdd,
                text: input,
            } => {
                let input = input.trim();
                if input.is_empty() {
                    return;
                }
                let path = match input.strip_prefix("~/").zip(dirs::home_dir()) {
                    Some((rest, home)) => home.join(rest),
                    None => std::path::PathBuf::from(input),
                };
                let ws = cx.ws.clone();
                let agent = cx.agent.clone();
                cx.spawn::<SkillsPane>(async move {
                    let r = if path.is_dir() {
                        ws.skills().add(&path, &agent).await
                    } else {
                        match ArchiveFormat::from_file_name(&path.to_string_lossy()) {
                            Some(fmt) => {
                                ws.skills().add_archive_file(&path, fmt, &agent, None).await
                            }
                            None => {
                                return Msg::Done(Err(format!(
                                    "{}: not a directory or a .zip/.tar/.tar.gz archive",
                                    path.display()
                                )));
                            }
                        }
                    };
                    Msg::Done(
                        r.map(|s| {
                            if s.already_installed {
                                format!("skill {} is already installed", s.name)
                            } else {
                                format!("added skill {}", s.name)
                            }
                        })
                        .map_err(|e| e.to_string()),
                    )
                });
            }
            _ => {}
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, _area: Rect, cx: &mut Ctx) -> bool {
        match list_mouse(&mut self.list.cursor, ev, self.inner, self.list.shown.len()) {
            ListMouse::Clicked(_, true) => self.act(SkillsAction::View, cx),
            ListMouse::None => false,
            _ => true,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let agent = if cx.agent.is_empty() {
            "default"
        } else {
            cx.agent.as_str()
        };
        let block = cx.block_for(
            area,
            &format!("{}{}", self.title(), filter_suffix(&self.list.filter)),
            &format!("agent {agent}"),
            focused,
        );
        let list = list_frame(f, area, block, &self.list.filter, cx);
        self.inner = list;
        let empty = self.list.shown.is_empty().then_some(if self.job.running() {
            "loading…"
        } else {
            "no skills"
        });
        if list_placeholder(f, list, self.error.as_deref(), empty, cx) {
            return;
        }
        let rows = &self.rows;
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
                let r = &rows[shown[i]];
                let (mark, mstyle, desc) = match r {
                    Row::Valid(s) => ("✓ ", t.success, s.description.clone()),
                    Row::Invalid(iv) => ("✗ ", t.error, iv.describe()),
                };
                let name = text::display(&r.name()).into_owned();
                let name_w = text::width(&name).min(w / 2);
                let name = text::truncate(&name, name_w.max(1)).into_owned();
                let rest = w.saturating_sub(2 + text::width(&name) + 1);
                Line::from(vec![
                    Span::styled(mark, mstyle),
                    Span::styled(name, t.base),
                    Span::styled(
                        format!(" {}", text::truncate(&text::display(&desc), rest)),
                        t.muted,
                    ),
                ])
            },
        );
    }
}

impl TaskPane for SkillsPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Listed(r) => {
                self.job.done();
                match r {
                    Ok(l) => {
                        self.partition = l.partition.clone();
                        self.rows = l
                            .skills
                            .iter()
                            .cloned()
                            .map(Row::Valid)
                            .chain(l.invalid.iter().cloned().map(Row::Invalid))
                            .collect();
                        self.error = None;
                    }
                    Err(e) => self.error = Some(e.clone()),
                }
                self.refilter();
                if self.job.wanted() {
                    self.load(cx);
                }
            }
            Msg::Done(r) => {
                match r {
                    Ok(m) => cx.toast(Level::Info, m.clone()),
                    Err(e) => cx.toast(Level::Error, e.clone()),
                }
                self.load(cx);
            }
        }
    }
}
