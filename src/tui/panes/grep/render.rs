//! Drawing the Grep pane: the query line with its toggles, then one row
//! per hit (`path:line  text`, the matches highlighted), the count and
//! the time in the title.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::query::match_ranges;
use super::{GrepPane, State};
use crate::tui::pane::{Ctx, placeholder};
use crate::tui::widgets::text;

/// What the title's right-hand note says: the count and the time, or
/// that the search runs.
fn note(p: &GrepPane, cx: &Ctx) -> String {
    match &p.state {
        State::Idle => "enter search · esc close".into(),
        State::Running { started } => {
            let ms = cx.elapsed_ms(*started);
            format!("searching… {}", text::duration_ms(ms))
        }
        State::Done { ms, more, .. } => {
            let n = p.hits.len();
            let plus = if *more { "+" } else { "" };
            let s = if n == 1 && !more { "" } else { "s" };
            format!("{n}{plus} hit{s} · {}", text::duration_ms(*ms))
        }
        State::Stopped => "stopped".into(),
        State::Failed(_) => "failed".into(),
    }
}

/// The toggles as `[Aa] [.*] [.h]`-style chips: lit when on.
fn toggles(p: &GrepPane, cx: &Ctx) -> Vec<Span<'static>> {
    let t = &cx.theme;
    let chip = |on: bool, s: &'static str| {
        let st = if on {
            t.accent.add_modifier(Modifier::BOLD)
        } else {
            t.muted
        };
        [Span::styled(s, st), Span::raw(" ")]
    };
    let q = &p.query;
    let mut v = Vec::new();
    v.extend(chip(q.ignore_case, "[aA]"));
    v.extend(chip(!q.literal, "[.*]"));
    v.extend(chip(q.hidden, "[.h]"));
    v
}

/// One hit as a row: relative path, line number, the text with its
/// leading blanks cut and the matches in the `matched` style.
fn hit_line(p: &GrepPane, i: usize, workdir: &str, cx: &Ctx) -> Line<'static> {
    let t = &cx.theme;
    let h = &p.hits[i];
    let rel = crate::backend::path::strip_root(workdir, &h.path)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| h.path.clone());
    let shown = text::display(&h.text);
    let body = shown.trim_start();
    let mut spans = vec![
        Span::styled(text::display(&rel).into_owned(), t.dir),
        Span::styled(format!(":{}", h.line), t.line_number),
        Span::raw("  "),
    ];
    let ranges = p
        .highlighter
        .as_ref()
        .map(|m| match_ranges(m, body))
        .unwrap_or_default();
    let mut at = 0;
    for (s, e) in ranges {
        if s < at || !body.is_char_boundary(s) || !body.is_char_boundary(e) {
            continue;
        }
        spans.push(Span::styled(body[at..s].to_string(), t.base));
        spans.push(Span::styled(body[s..e].to_string(), t.matched));
        at = e;
    }
    spans.push(Span::styled(body[at..].to_string(), t.base));
    Line::from(spans)
}

/// Draws the pane into `area`.
pub(super) fn draw(p: &mut GrepPane, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
    let t = &cx.theme;
    let title = if p.query.pattern.is_empty() {
        "Grep".to_string()
    } else {
        format!("Grep {}", p.query.label())
    };
    let block = cx.block_for(area, &title, &note(p, cx), focused);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    // The query line: `/ pattern` then the toggles on the right.
    let chips = toggles(p, cx);
    let chips_w: usize = chips.iter().map(|s| text::width(&s.content)).sum();
    let field_w = (inner.width as usize).saturating_sub(chips_w + 3).max(1);
    let typed = text::display(p.input.text());
    let shown = text::truncate_left(&typed, field_w.saturating_sub(1));
    let prompt_st = if p.editing { t.accent } else { t.muted };
    let buf = f.buffer_mut();
    buf.set_string(inner.x, inner.y, "/ ", prompt_st);
    buf.set_string(inner.x + 2, inner.y, shown.as_ref(), t.base);
    if chips_w + 3 <= inner.width as usize {
        let x = inner.x + inner.width - chips_w as u16;
        buf.set_line(x, inner.y, &Line::from(chips), chips_w as u16);
    }
    let caret_cols = text::width(&text::display(
        &p.input
            .text()
            .chars()
            .take(p.input.cursor())
            .collect::<String>(),
    ))
    .min(field_w.saturating_sub(1));
    p.caret = Some((inner.x + 2 + caret_cols as u16, inner.y));
    if inner.height < 2 {
        return;
    }
    let mut list = Rect::new(inner.x, inner.y + 1, inner.width, inner.height - 1);
    // A status line under the list when something was cut or skipped.
    let status = match &p.state {
        State::Done {
            more,
            dropped,
            note,
            ..
        } => {
            let mut parts = Vec::new();
            if *more {
                parts.push(format!(
                    "only the first {} hits were read: narrow with a path or --glob",
                    super::query::MAX_HITS
                ));
            }
            if *dropped > 0 {
                parts.push(format!(
                    "{} dropped past {}",
                    text::count(*dropped, "hit", "hits"),
                    text::human_size(super::query::MAX_HIT_BYTES as u64)
                ));
            }
            parts.extend(note.clone());
            (!parts.is_empty()).then(|| parts.join(" · "))
        }
        _ => None,
    };
    if let Some(s) = status
        && list.height >= 2
    {
        let y = list.y + list.height - 1;
        let s = text::truncate(&s, list.width as usize).into_owned();
        f.buffer_mut().set_string(list.x, y, s, t.warn);
        list.height -= 1;
    }
    p.list_area = list;
    let empty = match &p.state {
        State::Idle => Some(
            "type a pattern, Enter searches (alt-c case · alt-r regex · alt-h hidden)".to_string(),
        ),
        State::Running { .. } => Some("searching…".into()),
        State::Stopped if p.hits.is_empty() => Some("stopped".into()),
        State::Failed(e) => {
            let first = e.lines().next().unwrap_or("").to_string();
            placeholder(f, list, &first, t.error);
            return;
        }
        State::Done { .. } if p.hits.is_empty() => Some("no matches".into()),
        _ => None,
    };
    if let Some(msg) = empty {
        placeholder(f, list, &msg, t.muted);
        return;
    }
    let workdir = cx.ws.layout().workdir().to_string();
    let len = p.hits.len();
    p.cursor.fit(list.height as usize, len);
    let sel_style = if focused && !p.editing {
        t.selection
    } else {
        Style::default().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    };
    for (n, i) in p.cursor.visible(len).enumerate() {
        let r = Rect::new(list.x, list.y + n as u16, list.width, 1);
        let mut line = hit_line(p, i, &workdir, cx);
        if i == p.cursor.selected {
            // The selection restyles the row but not its matches, so the
            // match stays visible on the selected hit.
            f.buffer_mut().set_style(r, sel_style);
            for sp in &mut line.spans {
                if sp.style != t.matched {
                    sp.style = sp.style.patch(sel_style);
                }
            }
        }
        f.buffer_mut().set_line(r.x, r.y, &line, r.width);
    }
}
