//! The preview of the Files pane: decoding, loading, binary sniffing of
//! the rows on screen, drawing and layout, and the metadata document of a
//! file used by the viewer.

use ratatui::Frame;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use crate::backend::{ByteRange, FileKind, FileStat};
use crate::engine::offload::{png_dimensions, sniff_media_type};
use crate::tui::action::Doc;
use crate::tui::pane::{Ctx, placeholder};
use crate::tui::theme::Theme;
use crate::tui::widgets::ansi::StyledLine;
use crate::tui::widgets::text;

use super::*;

/// What a preview shows of `bytes`, the first bytes of a file of `size`
/// bytes: text lines (a cut UTF-8 character dropped), or binary (sniffed
/// media type, NUL bytes).
pub(crate) fn decode_preview(bytes: &[u8], size: u64) -> PreviewBody {
    let head = &bytes[..bytes.len().min(8192)];
    if let Some(media) = sniff_media_type(head) {
        return PreviewBody::Binary {
            media: media.to_string(),
            dims: png_dimensions(head),
        };
    }
    if head.contains(&0) {
        return PreviewBody::Binary {
            media: "application/octet-stream".into(),
            dims: None,
        };
    }
    // A read cut may end inside a UTF-8 character: drop that tail rather
    // than calling the file binary (C26).
    let mut end = bytes.len();
    if let Err(e) = std::str::from_utf8(bytes)
        && e.error_len().is_none()
    {
        end = e.valid_up_to();
    }
    let text = String::from_utf8_lossy(&bytes[..end]);
    let lines = text.lines().map(|l| l.to_string()).collect();
    PreviewBody::Text {
        lines,
        truncated: size > bytes.len() as u64,
    }
}

impl FilesPane {
    pub(super) fn want_preview(&mut self, cx: &Ctx) {
        let Some(i) = self.selected() else {
            self.preview = None;
            return;
        };
        let path = self.nodes[i].path.clone();
        if self.preview.as_ref().is_some_and(|p| p.path == path) {
            return;
        }
        self.preview_job.want(path);
        self.start_preview(cx);
    }

    pub(super) fn start_preview(&mut self, cx: &Ctx) {
        // Taking the request counts the job as running: the two ways out
        // below that read nothing end it at once.
        let Some(path) = self.preview_job.start() else {
            return;
        };
        let Some(i) = self.find(&path) else {
            self.preview_job.done();
            return;
        };
        let n = &self.nodes[i];
        if n.is_dir() {
            self.preview_job.done();
            let count = n.children.as_ref().map(|c| c.len()).unwrap_or(0);
            self.preview = Some(Preview {
                path,
                body: PreviewBody::Dir(count),
                scroll: 0,
            });
            return;
        }
        let size = n.size;
        let ws = cx.ws.clone();
        cx.spawn::<FilesPane>(async move {
            let body = match ws
                .sandbox()
                .read(
                    &path,
                    Some(ByteRange {
                        offset: 0,
                        len: PREVIEW_BYTES,
                    }),
                )
                .await
            {
                Ok(bytes) => decode_preview(&bytes, size),
                Err(e) => PreviewBody::Error(e.to_string()),
            };
            Msg::Preview(path, body)
        });
    }

    pub(super) fn sniff_visible(&mut self, cx: &Ctx) {
        if self.sniffing {
            return;
        }
        let todo: Vec<String> = self
            .list
            .cursor
            .visible(self.list.shown.len())
            .map(|r| self.list.shown[r])
            .filter(|&i| {
                let n = &self.nodes[i];
                n.kind == FileKind::File && n.binary.is_none() && n.size > 0
            })
            .take(SNIFF_BATCH)
            .map(|i| self.nodes[i].path.clone())
            .collect();
        if todo.is_empty() {
            return;
        }
        self.sniffing = true;
        let ws = cx.ws.clone();
        cx.spawn::<FilesPane>(async move {
            let mut out = Vec::with_capacity(todo.len());
            for p in todo {
                let bin = match ws
                    .sandbox()
                    .read(
                        &p,
                        Some(ByteRange {
                            offset: 0,
                            len: SNIFF_BYTES,
                        }),
                    )
                    .await
                {
                    Ok(b) => sniff_media_type(&b).is_some() || b.contains(&0),
                    Err(_) => false,
                };
                out.push((p, bin));
            }
            Msg::Sniffed(out)
        });
    }
}

impl FilesPane {
    pub(super) fn render_preview(&mut self, f: &mut Frame<'_>, area: Rect, cx: &Ctx) {
        let t = &cx.theme;
        let Some(p) = &mut self.preview else {
            placeholder(f, area, "no file selected", t.muted);
            return;
        };
        let buf = f.buffer_mut();
        match &p.body {
            PreviewBody::Text { lines, truncated } => {
                if lines.is_empty() {
                    placeholder(f, area, "(empty file)", t.muted);
                    return;
                }
                draw_text(buf, area, lines, *truncated, &mut p.scroll, t);
            }
            PreviewBody::Binary { media, dims } => {
                let node = self.by_path.get(&p.path).map(|&i| &self.nodes[i]);
                let mut rows = vec![
                    format!("binary file · {media}"),
                    format!(
                        "size      {}",
                        node.map(|n| text::human_size(n.size)).unwrap_or_default()
                    ),
                ];
                if let Some((w, h)) = dims {
                    rows.push(format!("pixels    {w}×{h}"));
                }
                for (i, r) in rows.iter().enumerate().take(area.height as usize) {
                    buf.set_stringn(area.x, area.y + i as u16, r, area.width as usize, t.binary);
                }
            }
            PreviewBody::Dir(_) => {
                // The count comes from the tree as it is now, not from when
                // the preview was made: expanding lists the directory after
                // the cursor landed on it.
                let listed = self
                    .by_path
                    .get(&p.path)
                    .and_then(|&i| self.nodes[i].children.as_ref().map(|c| c.len()));
                let msg = match listed {
                    Some(n) => format!("directory · {}", text::count(n, "entry", "entries")),
                    None => "directory · enter expands it".to_string(),
                };
                buf.set_stringn(area.x, area.y, msg, area.width as usize, t.muted);
            }
            PreviewBody::Error(e) => {
                buf.set_stringn(
                    area.x,
                    area.y,
                    text::display(e),
                    area.width as usize,
                    t.error,
                );
            }
        }
    }
}

/// Draws text lines with their numbers into `area` from line `*scroll`
/// (clamped to the text), and, at the end of a text cut at
/// [`PREVIEW_BYTES`], a note saying so. Used by Files and the finder.
pub(crate) fn draw_text(
    buf: &mut Buffer,
    area: Rect,
    lines: &[String],
    truncated: bool,
    scroll: &mut usize,
    t: &Theme,
) {
    let h = area.height as usize;
    *scroll = (*scroll).min(lines.len().saturating_sub(1));
    let numw = (*scroll + h).min(lines.len()).to_string().len().max(2);
    for (row, (n, l)) in lines.iter().enumerate().skip(*scroll).take(h).enumerate() {
        let y = area.y + row as u16;
        let num = format!("{:>numw$} ", n + 1);
        buf.set_stringn(area.x, y, &num, area.width as usize, t.line_number);
        let x = area.x + num.len() as u16;
        if x < area.x + area.width {
            let w = (area.x + area.width - x) as usize;
            buf.set_stringn(x, y, text::display(l), w, t.base);
        }
    }
    if truncated && lines.len() <= *scroll + h && area.height > 0 {
        let y = area.y + (lines.len() - *scroll).min(h.saturating_sub(1)) as u16;
        buf.set_stringn(
            area.x,
            y,
            "… (preview shows the first 64 KiB)",
            area.width as usize,
            t.muted,
        );
    }
}

/// Width from which the preview sits beside the tree.
pub const PREVIEW_SIDE_MIN_WIDTH: u16 = 64;
/// Height from which the preview sits under the tree instead.
pub const PREVIEW_BELOW_MIN_HEIGHT: u16 = 12;

/// `(tree, preview, preview is below)` areas inside `inner`, or `None`
/// when the preview is off or the pane is too small for it.
pub(super) fn preview_layout(inner: Rect, on: bool) -> Option<(Rect, Rect, bool)> {
    if !on {
        return None;
    }
    if inner.width >= PREVIEW_SIDE_MIN_WIDTH {
        let tw = (inner.width * 45 / 100).max(20);
        return Some((
            Rect::new(inner.x, inner.y, tw, inner.height),
            Rect::new(
                inner.x + tw + 1,
                inner.y,
                inner.width - tw - 1,
                inner.height,
            ),
            false,
        ));
    }
    if inner.height >= PREVIEW_BELOW_MIN_HEIGHT && inner.width >= 20 {
        let th = inner.height / 2;
        return Some((
            Rect::new(inner.x, inner.y, inner.width, th),
            Rect::new(
                inner.x,
                inner.y + th + 1,
                inner.width,
                inner.height - th - 1,
            ),
            true,
        ));
    }
    None
}

/// A document describing a file or blob: size, type, pixels (used by the
/// viewer for binary files and `workspace:///` links).
pub fn metadata_doc(path: &str, stat: Option<&FileStat>, head: &[u8], error: Option<&str>) -> Doc {
    let mut lines = vec![StyledLine::plain(
        &format!("path        {path}"),
        Default::default(),
    )];
    if let Some(e) = error {
        lines.push(StyledLine::plain(
            &format!("error       {e}"),
            Default::default(),
        ));
    }
    if let Some(s) = stat {
        lines.push(StyledLine::plain(
            &format!(
                "size        {} bytes ({})",
                s.size,
                text::human_size(s.size)
            ),
            Default::default(),
        ));
        if let Some(m) = s.modified {
            let dt: chrono::DateTime<chrono::Utc> = m.into();
            lines.push(StyledLine::plain(
                &format!("modified    {}", dt.format("%Y-%m-%d %H:%M:%S UTC")),
                Default::default(),
            ));
        }
        if let Some(mode) = s.mode {
            lines.push(StyledLine::plain(
                &format!("mode        {:o}", mode & 0o7777),
                Default::default(),
            ));
        }
    }
    if error.is_none() {
        let media = sniff_media_type(head).unwrap_or(if head.contains(&0) {
            "application/octet-stream"
        } else {
            "text/plain (probably)"
        });
        lines.push(StyledLine::plain(
            &format!("media type  {media}"),
            Default::default(),
        ));
        if let Some((w, h)) = png_dimensions(head) {
            lines.push(StyledLine::plain(
                &format!("pixels      {w}×{h}"),
                Default::default(),
            ));
        }
    }
    Doc {
        title: path.to_string(),
        lines,
        links: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preview_decoding() {
        match decode_preview(b"a\nb\n", 4) {
            PreviewBody::Text { lines, truncated } => {
                assert_eq!(lines, ["a", "b"]);
                assert!(!truncated);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode_preview(b"\x89PNG\r\n\x1a\n", 8),
            PreviewBody::Binary { .. }
        ));
        assert!(matches!(
            decode_preview(b"a\0b", 3),
            PreviewBody::Binary { .. }
        ));
        // A cut inside a UTF-8 character is not binary (C26).
        match decode_preview("é".repeat(10).as_bytes().split_at(5).0, 20) {
            PreviewBody::Text { lines, truncated } => {
                assert_eq!(lines, ["éé"]);
                assert!(truncated);
            }
            other => panic!("{other:?}"),
        }
    }
}
