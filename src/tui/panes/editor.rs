//! The editor: a full-screen ratatui-textarea on one workspace file,
//! saved atomically through the Write tool (so the save is journalled and
//! the backend's atomic write — temp file + rename — is used).
//!
//! Line endings are kept: a CRLF file is edited as lines and written back
//! with CRLF; a final newline stays if the file had one. Files that are
//! binary, not UTF-8 or over [`MAX_EDIT_BYTES`] are refused with the
//! reason. In read-only mode the file opens for reading only.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui_textarea::TextArea;
use serde_json::json;

use crate::engine::workspace::ToolCall;
use crate::tui::action::{Choice, DialogTag, Effect, Level, PaneEvent};
use crate::tui::keymap::{ActionSpec, KeyChord};
use crate::tui::pane::{Ctx, Pane, TaskPane, placeholder};
use crate::tui::widgets::paste::clean_paste;
use crate::tui::widgets::text;

/// Pane id.
pub const ID: &str = "editor";

/// Largest file opened for editing (4 MiB).
pub const MAX_EDIT_BYTES: u64 = 4 * 1024 * 1024;

crate::pane_action_enum! {
    /// An action of the pane (an entry of [`ACTIONS`]).
    pub(crate) enum EditorAction in "editor", no nav;
    Save => act("editor.save", ID, "save", &["ctrl-s"], true, true),
    Close => act("editor.close", ID, "close", &["esc"], false, true),
    // ctrl-z/ctrl-y as most editors; ctrl-u/ctrl-r (ratatui-textarea's
    // own, vim's redo) kept for those who learnt them (issue 22).
    Undo => act("editor.undo", ID, "undo", &["ctrl-z", "ctrl-u"], false, true),
    Redo => act("editor.redo", ID, "redo", &["ctrl-y", "ctrl-r"], false, true),
}

/// Keys of the pane.
pub const ACTIONS: &[ActionSpec] = EditorAction::TABLE;

pub(crate) enum Msg {
    Loaded(String, Result<String, String>),
    Saved(String, Result<String, String>),
    /// The file changed on disk since it was opened: nothing was written.
    Conflict(String),
}

fn digest(b: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(b).into()
}

/// The editor pane.
pub struct EditorPane {
    path: Option<String>,
    shown: String,
    area: Option<TextArea<'static>>,
    original: Vec<String>,
    crlf: bool,
    final_newline: bool,
    loading: bool,
    saving: bool,
    error: Option<String>,
    /// SHA-256 of the file as last loaded or saved; a save first checks
    /// the disk still holds it, so changes made meanwhile are not lost.
    disk: Option<[u8; 32]>,
    /// Hash of the text being saved, for `disk` once the save lands.
    pending: Option<[u8; 32]>,
}

impl Default for EditorPane {
    fn default() -> Self {
        Self::new()
    }
}

/// Text as lines for the editor: `(lines, crlf, final newline)`.
pub fn split_text(s: &str) -> (Vec<String>, bool, bool) {
    let crlf = s.contains("\r\n") && !s.replace("\r\n", "").contains('\n');
    let final_newline = s.ends_with('\n');
    let body = if final_newline {
        let cut = if crlf { 2 } else { 1 };
        &s[..s.len() - cut.min(s.len())]
    } else {
        s
    };
    let lines = if crlf {
        body.split("\r\n").map(String::from).collect()
    } else {
        body.split('\n').map(String::from).collect()
    };
    (lines, crlf, final_newline)
}

/// Joins editor lines back with the file's own line ending.
pub fn join_text(lines: &[String], crlf: bool, final_newline: bool) -> String {
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut s = lines.join(eol);
    if final_newline {
        s.push_str(eol);
    }
    s
}

impl EditorPane {
    /// A closed editor.
    pub fn new() -> Self {
        EditorPane {
            path: None,
            shown: String::new(),
            area: None,
            original: Vec::new(),
            crlf: false,
            final_newline: false,
            loading: false,
            saving: false,
            error: None,
            disk: None,
            pending: None,
        }
    }

    /// True when the text differs from what was loaded or last saved.
    pub fn modified(&self) -> bool {
        self.area
            .as_ref()
            .is_some_and(|a| a.lines() != self.original.as_slice())
    }

    /// The text being edited (tests).
    pub fn lines(&self) -> Option<&[String]> {
        self.area.as_ref().map(|a| a.lines())
    }

    fn open(&mut self, path: &str, cx: &mut Ctx) {
        self.path = Some(path.to_string());
        self.shown = crate::backend::path::strip_root(cx.ws.layout().workdir(), path)
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| path.to_string());
        self.area = None;
        self.error = None;
        self.loading = true;
        let ws = cx.ws.clone();
        let p = path.to_string();
        cx.spawn::<EditorPane>(async move {
            let r = async {
                let st = ws.sandbox().stat(&p).await.map_err(|e| e.to_string())?;
                if st.is_dir_like() {
                    return Err("is a directory".to_string());
                }
                if st.size > MAX_EDIT_BYTES {
                    return Err(format!(
                        "{} is over the editor's {} limit",
                        text::human_size(st.size),
                        text::human_size(MAX_EDIT_BYTES)
                    ));
                }
                let bytes = ws
                    .sandbox()
                    .read(&p, None)
                    .await
                    .map_err(|e| e.to_string())?;
                if bytes.contains(&0) {
                    return Err("binary file (holds NUL bytes)".to_string());
                }
                String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text ({e})"))
            }
            .await;
            Msg::Loaded(p, r)
        });
    }

    fn save(&mut self, force: bool, cx: &mut Ctx) {
        let (Some(path), Some(area)) = (&self.path, &self.area) else {
            return;
        };
        if self.saving {
            return;
        }
        self.saving = true;
        let content = join_text(area.lines(), self.crlf, self.final_newline);
        self.pending = Some(digest(content.as_bytes()));
        let mut args = json!({"file_path": path, "content": content});
        if let (false, Some(want)) = (force, self.disk) {
            // Compare-and-swap inside Write, under the file's lock: a
            // change since loading is refused, never overwritten.
            args["expected_sha256"] = json!(hex::encode(want));
        }
        let ws = cx.ws.clone();
        let call = ToolCall {
            agent: cx.agent.clone(),
            session: cx.session.clone(),
            tool: "Write".into(),
            args,
            ..Default::default()
        };
        let p = path.clone();
        cx.spawn::<EditorPane>(async move {
            let r = ws.call_tool(call).await;
            if r.metadata.get("changed_since_read") == Some(&json!(true)) {
                return Msg::Conflict(p);
            }
            let text = r.text();
            Msg::Saved(p, if r.is_success() { Ok(text) } else { Err(text) })
        });
    }

    fn close(&mut self, cx: &mut Ctx) {
        self.path = None;
        self.area = None;
        self.error = None;
        cx.effect(Effect::CloseModal);
        cx.effect(Effect::Focus(super::files::ID));
    }
}

impl Pane for EditorPane {
    crate::task_pane_glue!();

    fn title(&self) -> String {
        match &self.path {
            Some(_) => format!("Edit {}", text::display(&self.shown)),
            None => "Editor".into(),
        }
    }

    fn text_input_active(&self) -> bool {
        self.area.is_some()
    }

    fn on_key(&mut self, key: &KeyEvent, cx: &mut Ctx) -> bool {
        let Some(area) = &mut self.area else {
            return false;
        };
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        // Keys the key map owns: the editor's own (save, close, undo,
        // redo, as rebound), quit, help.
        let chord = KeyChord::from_event(key);
        if cx.keymap.lookup(ID, chord).is_some() {
            return false;
        }
        match key.code {
            KeyCode::Esc | KeyCode::F(_) => return false,
            KeyCode::Char('q') if ctrl => return false,
            _ => {}
        }
        if !cx.can("editor.save") {
            // Read-only: move around, change nothing.
            let nav = matches!(
                key.code,
                KeyCode::Up
                    | KeyCode::Down
                    | KeyCode::Left
                    | KeyCode::Right
                    | KeyCode::PageUp
                    | KeyCode::PageDown
                    | KeyCode::Home
                    | KeyCode::End
            );
            if nav {
                area.input(*key);
            }
            return true;
        }
        area.input(*key);
        true
    }

    fn on_paste(&mut self, s: &str, cx: &mut Ctx) -> bool {
        let Some(area) = &mut self.area else {
            return false;
        };
        if cx.can("editor.save") {
            area.insert_str(clean_paste(s));
        }
        true
    }

    fn on_action(&mut self, action: &'static str, cx: &mut Ctx) -> bool {
        match EditorAction::parse(action) {
            Some(EditorAction::Save) => self.save(false, cx),
            Some(EditorAction::Undo) => {
                if let Some(a) = &mut self.area
                    && cx.can("editor.save")
                    && !a.undo()
                {
                    cx.toast(Level::Info, "nothing to undo");
                }
            }
            Some(EditorAction::Redo) => {
                if let Some(a) = &mut self.area
                    && cx.can("editor.save")
                    && !a.redo()
                {
                    cx.toast(Level::Info, "nothing to redo");
                }
            }
            Some(EditorAction::Close) => {
                if self.modified() {
                    cx.effect(Effect::Confirm {
                        pane: ID,
                        message: "Discard unsaved changes?".into(),
                        tag: DialogTag::DiscardEdits,
                    });
                } else {
                    self.close(cx);
                }
            }
            None => return false,
        }
        true
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        match ev {
            PaneEvent::Open(path) => self.open(path, cx),
            PaneEvent::Confirmed(DialogTag::DiscardEdits) => self.close(cx),
            PaneEvent::Confirmed(DialogTag::SaveReload) => {
                if let Some(p) = self.path.clone() {
                    self.open(&p, cx);
                }
            }
            PaneEvent::Confirmed(DialogTag::SaveOverwrite) => self.save(true, cx),
            _ => {}
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let note = if !cx.can("editor.save") {
            "read-only · esc close".to_string()
        } else if self.saving {
            "saving…".into()
        } else if self.modified() {
            "modified · ctrl-s save · esc close".into()
        } else {
            "ctrl-s save · esc close".into()
        };
        let block = cx.block_for(area, &self.title(), &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        if let Some(e) = &self.error {
            placeholder(f, inner, &format!("cannot edit: {e}"), cx.theme.error);
            return;
        }
        match &self.area {
            Some(a) => f.render_widget(a, inner),
            None if self.loading => placeholder(f, inner, "loading…", cx.theme.muted),
            None => placeholder(f, inner, "no file open", cx.theme.muted),
        }
    }
}

impl TaskPane for EditorPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Loaded(p, r) if self.path.as_ref() == Some(p) => {
                self.loading = false;
                match r {
                    Ok(s) => {
                        self.disk = Some(digest(s.as_bytes()));
                        let (lines, crlf, nl) = split_text(s);
                        self.original = lines.clone();
                        self.crlf = crlf;
                        self.final_newline = nl;
                        let mut a = TextArea::new(lines);
                        a.set_line_number_style(cx.theme.line_number);
                        a.set_cursor_line_style(ratatui::style::Style::default());
                        a.set_cursor_style(cx.theme.base.add_modifier(Modifier::REVERSED));
                        a.set_style(cx.theme.base);
                        a.set_max_histories(500);
                        self.area = Some(a);
                    }
                    Err(e) => {
                        self.error = Some(e.clone());
                        cx.toast(Level::Error, format!("cannot edit {p}: {e}"));
                    }
                }
            }
            Msg::Saved(p, r) => {
                self.saving = false;
                match r {
                    Ok(_) => {
                        if self.path.as_ref() == Some(p)
                            && let Some(a) = &self.area
                        {
                            self.original = a.lines().to_vec();
                            self.disk = self.pending;
                        }
                        cx.toast(Level::Info, format!("saved {p}"));
                    }
                    Err(e) => cx.toast(Level::Error, format!("save failed: {e}")),
                }
            }
            Msg::Conflict(p) => {
                self.saving = false;
                // One key answers (issue 22): no "type o, then Enter".
                cx.effect(Effect::Choose {
                    pane: ID,
                    message: format!(
                        "{} changed on disk since it was opened",
                        text::display(&self.shown)
                    ),
                    choices: vec![
                        Choice {
                            key: 'r',
                            label: "reload (drop my edits)",
                            tag: DialogTag::SaveReload,
                        },
                        Choice {
                            key: 'o',
                            label: "overwrite",
                            tag: DialogTag::SaveOverwrite,
                        },
                    ],
                    on_cancel: Some("save cancelled: your edits are kept".into()),
                });
                cx.toast(Level::Warn, format!("not saved: {p} changed on disk"));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_endings_round_trip() {
        for s in ["a\nb\n", "a\nb", "a\r\nb\r\n", "", "\n", "x\r\ny"] {
            let (l, crlf, nl) = split_text(s);
            assert_eq!(join_text(&l, crlf, nl), s, "{s:?}");
        }
        let (l, crlf, _) = split_text("a\r\nb\r\n");
        assert!(crlf);
        assert_eq!(l, ["a", "b"]);
    }
}
