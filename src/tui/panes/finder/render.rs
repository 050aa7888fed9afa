//! Drawing the finder: the query line, the ranked paths (matched
//! characters highlighted) and the preview beside them; the count, the
//! listing's size and time in the title.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::rank::match_positions;
use super::{FinderPane, Walk};
use crate::tui::pane::{Ctx, placeholder};
use crate::tui::panes::files::{PREVIEW_SIDE_MIN_WIDTH, PreviewBody, draw_text};
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::text;

/// The title's note: matches of listed files, or what the walk does.
fn note(p: &FinderPane, cx: &Ctx) -> String {
    let plus = if p.more { "+" } else { "" };
    let counts = format!("{}/{}{plus}", p.ranked.len(), p.paths.len());
    match &p.walk {
        Walk::Never => "listing…".into(),
        Walk::Running { started } => {
            let ms = cx.elapsed_ms(*started);
            if p.paths.is_empty() {
                format!("listing… {}", text::duration_ms(ms))
            } else {
                format!("{counts} · listing again…")
            }
        }
        Walk::Done { ms } => format!("{counts} files · listed in {}", text::duration_ms(*ms)),
        Walk::Failed(_) => format!("{counts} · listing failed"),
    }
}

/// One path as a row of `width` columns: the characters the pattern
/// matched in the `matched` style, the folders muted; a path too long
/// loses its start (`…`), never its file name.
fn row(p: &mut FinderPane, r: usize, width: usize, cx: &Ctx) -> Line<'static> {
    let t = &cx.theme;
    let i = p.ranked[r] as usize;
    let path = &p.paths[i];
    let hits = if p.input.text().trim().is_empty() {
        Vec::new()
    } else {
        match_positions(&mut p.matcher, &p.pattern, &p.hay[i])
    };
    let name_at = path.rfind('/').map_or(0, |s| path[..=s].chars().count());
    let mut spans: Vec<Span<'static>> = Vec::new();
    let mut hit = hits.iter().peekable();
    let mut skip = 0;
    let mut over = text::width(&text::display(path)).saturating_sub(width);
    if over > 0 {
        spans.push(Span::styled("…", t.muted));
        over += 1;
        for c in path.chars() {
            if over == 0 {
                break;
            }
            over = over.saturating_sub(text::width(&text::display(c.encode_utf8(&mut [0u8; 4]))));
            skip += 1;
        }
    }
    for (n, c) in path.chars().enumerate() {
        if n < skip {
            hit.next_if(|&&h| h as usize == n);
            continue;
        }
        let style = if hit.next_if(|&&h| h as usize == n).is_some() {
            t.matched
        } else if n < name_at {
            t.muted
        } else {
            t.base
        };
        let shown = text::display(c.encode_utf8(&mut [0u8; 4])).into_owned();
        match spans.last_mut() {
            Some(s) if s.style == style => s.content.to_mut().push_str(&shown),
            _ => spans.push(Span::styled(shown, style)),
        }
    }
    Line::from(spans)
}

/// Draws the pane into `area`.
pub(super) fn draw(p: &mut FinderPane, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
    let t = &cx.theme;
    let block = cx.block_for(area, "Find file", &note(p, cx), focused);
    let inner = block.inner(area);
    f.render_widget(block, area);
    if inner.height == 0 || inner.width < 4 {
        return;
    }
    // The query line: `> typed`, the caret after it.
    let (shown, col) = p.input.view(inner.width as usize - 2);
    let buf = f.buffer_mut();
    buf.set_string(inner.x, inner.y, "> ", t.accent);
    buf.set_string(inner.x + 2, inner.y, &shown, t.base);
    p.caret = Some((inner.x + 2 + col as u16, inner.y));
    let body = Rect::new(
        inner.x,
        inner.y + 1,
        inner.width,
        inner.height.saturating_sub(1),
    );
    if body.height == 0 {
        return;
    }
    // The preview beside the list when there is room, as in Files.
    let (list, prev) = if body.width >= PREVIEW_SIDE_MIN_WIDTH {
        let lw = body.width * 45 / 100;
        (
            Rect::new(body.x, body.y, lw, body.height),
            Some(Rect::new(
                body.x + lw + 1,
                body.y,
                body.width - lw - 1,
                body.height,
            )),
        )
    } else {
        (body, None)
    };
    // The walker's note on unreadable paths takes the list's last row.
    let list = match &p.note {
        Some(n) if list.height > 2 => {
            let y = list.y + list.height - 1;
            let n = n.trim_end_matches(':');
            f.buffer_mut()
                .set_stringn(list.x, y, n, list.width as usize, t.warn);
            Rect::new(list.x, list.y, list.width, list.height - 1)
        }
        _ => list,
    };
    p.list_area = list;
    if p.ranked.is_empty() {
        let msg = match &p.walk {
            Walk::Never | Walk::Running { .. } if p.paths.is_empty() => "listing files…".into(),
            Walk::Failed(e) => text::display(e).into_owned(),
            _ if p.paths.is_empty() => "no files in the workspace".into(),
            _ => "no file matches".to_string(),
        };
        placeholder(f, list, &msg, t.muted);
    } else {
        let len = p.ranked.len();
        let mut cursor = std::mem::take(&mut p.cursor);
        let mut rows = Vec::new();
        cursor.fit(list.height as usize, len);
        for r in cursor.visible(len) {
            rows.push(row(p, r, list.width as usize, cx));
        }
        let first = cursor.offset;
        render_rows(
            f.buffer_mut(),
            list,
            &mut cursor,
            len,
            focused,
            t.selection,
            |r| rows[r - first].clone(),
        );
        p.cursor = cursor;
    }
    if let Some(pa) = prev {
        for y in pa.y..pa.y + pa.height {
            f.buffer_mut().set_string(pa.x - 1, y, "│", t.border);
        }
        draw_preview(p, f, pa, cx);
    }
}

fn draw_preview(p: &mut FinderPane, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
    let t = &cx.theme;
    let Some((_, body, scroll)) = &mut p.preview else {
        let msg = if p.ranked.is_empty() {
            ""
        } else {
            "reading…"
        };
        placeholder(f, area, msg, t.muted);
        return;
    };
    let buf = f.buffer_mut();
    let w = area.width as usize;
    match body {
        PreviewBody::Text { lines, .. } if lines.is_empty() => {
            placeholder(f, area, "(empty file)", t.muted);
        }
        PreviewBody::Text { lines, truncated } => {
            draw_text(buf, area, lines, *truncated, scroll, t);
        }
        PreviewBody::Binary { media, dims } => {
            let mut s = format!("binary file · {media}");
            if let Some((pw, ph)) = dims {
                s.push_str(&format!(" · {pw}×{ph} pixels"));
            }
            buf.set_stringn(area.x, area.y, s, w, t.binary);
        }
        PreviewBody::Dir(_) => {}
        PreviewBody::Error(e) => {
            buf.set_stringn(area.x, area.y, text::display(e), w, t.error);
        }
    }
}
