//! The `Pane` glue of the Agent pane: the side panel, keys, actions,
//! events, mouse, rendering, task messages and the model dialog.

use super::conversation::wrap_text;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use crate::agent::AgentReceived;
use crate::tui::action::{DialogTag, Effect, Level, PaneEvent};
use crate::tui::pane::{Ctx, ListMouse, Pane, TaskPane, list_mouse};
use crate::tui::pane::{Nav, nav};
use crate::tui::widgets::follow;
use crate::tui::widgets::list::render_rows;
use crate::tui::widgets::text;

use super::*;

impl AgentPane {
    pub(super) fn render_side(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let w = area.width as usize;
        let buf = f.buffer_mut();
        buf.set_stringn(area.x, area.y, "Demos", w, t.title);
        let list_h = (self.demos.len() as u16).min(area.height.saturating_sub(1));
        let list = Rect::new(area.x, area.y + 1, area.width, list_h);
        self.side_list = list;
        let demos = &self.demos;
        let selected = self.cursor.selected;
        render_rows(
            buf,
            list,
            &mut self.cursor,
            demos.len(),
            focused && !self.typing,
            t.selection,
            |i| {
                let mark = if i == selected { "▸" } else { " " };
                Line::from(Span::styled(format!("{mark} {}", demos[i].0), t.base))
            },
        );
        let mut rows: Vec<(String, Style)> = Vec::new();
        if let Some((_, d)) = self.demos.get(self.cursor.selected) {
            for l in wrap_text(d, w) {
                rows.push((l, t.muted));
            }
        }
        rows.push((String::new(), t.base));
        rows.push((
            format!("step mode {}", if self.stepping { "on" } else { "off" }),
            if self.stepping { t.warn } else { t.muted },
        ));
        match &self.model {
            Some(m) => {
                rows.push((format!("model {}", m.model), t.base));
                rows.push((m.url.clone(), t.muted));
            }
            None => rows.push(("model: none (m sets one)".into(), t.muted)),
        }
        rows.push((String::new(), t.base));
        if let Some(s) = self.session() {
            rows.push(("session".into(), t.muted));
            rows.push((s.to_string(), t.base));
        }
        if self.run.is_some() || self.last.is_some() {
            rows.push((
                format!(
                    "{} · {}",
                    text::count(self.tool_calls, "tool call", "tool calls"),
                    text::count(self.offloads, "offload", "offloads")
                ),
                t.base,
            ));
            rows.push((
                format!(
                    "{} · {}",
                    text::count(self.compressions, "compression", "compressions"),
                    text::count(self.errors, "error", "errors")
                ),
                if self.errors > 0 { t.error } else { t.base },
            ));
        }
        if let Some((_, o)) = &self.last
            && self.run.is_none()
        {
            rows.push((format!("last run: {o}"), t.muted));
        }
        let top = list.y + list.height + 1;
        for (i, (s, st)) in rows.iter().enumerate() {
            let y = top + i as u16;
            if y >= area.y + area.height {
                break;
            }
            let s = text::truncate(&text::display(s), w).into_owned();
            buf.set_string(area.x, y, s, *st);
        }
    }
}

impl AgentPane {
    /// Runs one of the pane's actions: keys, the palette and the mouse
    /// all end here. True when it was handled.
    pub(super) fn act(&mut self, action: AgentAction, cx: &mut Ctx) -> bool {
        match action {
            AgentAction::Nav(verb @ (Nav::Down | Nav::Up | Nav::Top | Nav::Bottom)) => {
                nav(&mut self.cursor, verb, self.demos.len());
            }
            AgentAction::Nav(
                verb @ (Nav::PageDown | Nav::PageUp | Nav::HalfDown | Nav::HalfUp),
            ) => {
                let rows = verb.page_rows(self.view_height).unwrap_or(0);
                // Down the page is toward the newest line (back 0).
                self.back = self.back.saturating_add_signed(-rows);
                self.follow = self.back == 0;
            }
            AgentAction::Run => self.run_demo(cx),
            AgentAction::StepMode => {
                let on = !self.stepping;
                self.set_stepping(on, cx);
            }
            AgentAction::Step => match self.run.as_ref().and_then(|r| r.handle.as_ref()) {
                Some(h) if h.step_control().is_stepping() => h.step_control().step(),
                _ => cx.toast(
                    Level::Info,
                    "nothing waits for a step (t turns step mode on)",
                ),
            },
            AgentAction::Continue => {
                if self.stepping {
                    self.set_stepping(false, cx);
                }
            }
            AgentAction::Stop | AgentAction::StopTyping => {
                if self.run.is_some() {
                    self.stop(cx);
                } else if self.typing {
                    self.prompt.clear();
                }
            }
            AgentAction::Prompt => {
                if self.model.is_none() {
                    cx.toast(Level::Warn, "set a model first: m, or :agent URL MODEL");
                    self.ask_model(cx);
                    self.type_after_model = true;
                } else {
                    self.typing = true;
                }
            }
            AgentAction::Model => {
                self.type_after_model = false;
                self.ask_model(cx)
            }
            AgentAction::Clear => {
                self.lines.clear();
                self.partial = None;
                self.partial_chars = 0;
                self.back = 0;
                self.follow = true;
            }
            AgentAction::Close => cx.effect(Effect::CloseModal),
            AgentAction::Send => {
                let text_ = self.prompt.text();
                if text_.trim().is_empty() {
                    return true;
                }
                if self.run.is_some() {
                    cx.toast(Level::Warn, "the agent is running: x stops it");
                    return true;
                }
                self.prompt.clear();
                self.run_prompt(text_, cx);
            }
            AgentAction::Newline => self.prompt.insert_newline(),
            AgentAction::Leave => self.typing = false,
        }
        true
    }
}

impl Pane for AgentPane {
    crate::task_pane_glue!(actions: AgentAction);

    fn title(&self) -> String {
        "Agent".into()
    }

    fn context(&self) -> &'static str {
        if self.typing { PROMPT } else { ID }
    }

    fn text_input_active(&self) -> bool {
        self.typing
    }

    fn blur(&mut self) {
        self.typing = false;
    }

    fn on_key(&mut self, key: &KeyEvent, _cx: &mut Ctx) -> bool {
        // Send, new line, leave, stop, quit and help are the key map's.
        self.prompt.key(key)
    }

    fn on_paste(&mut self, s: &str, _cx: &mut Ctx) -> bool {
        if !self.typing {
            return false;
        }
        self.prompt.paste(s);
        true
    }

    fn busy(&self) -> Option<String> {
        self.run.as_ref().map(|_| "an agent is running".to_string())
    }

    fn shutdown(&mut self, _cx: &mut Ctx) {
        if let Some(r) = &mut self.run {
            r.stop_requested = true;
            if let Some(h) = &r.handle {
                h.stop();
            }
        }
    }

    fn on_event(&mut self, ev: &PaneEvent<'_>, cx: &mut Ctx) {
        if let PaneEvent::Input {
            tag: DialogTag::AgentModel,
            text: t,
        } = ev
        {
            if t.trim().is_empty() {
                self.model = None;
                cx.toast(Level::Info, "model cleared");
                return;
            }
            match ModelSetting::parse(t) {
                Ok(m) => {
                    let then = if self.type_after_model {
                        "type a message"
                    } else {
                        "i types a message"
                    };
                    cx.toast(
                        Level::Info,
                        format!("model {} at {} · {then}", m.model, m.url),
                    );
                    self.model = Some(m);
                    self.typing = std::mem::take(&mut self.type_after_model);
                }
                Err(e) => {
                    cx.toast(Level::Error, e);
                    // Back to the dialog with the text, to fix it.
                    self.ask_model_with(cx, t.trim().to_string());
                }
            }
        }
    }

    fn on_mouse(&mut self, ev: &MouseEvent, area: Rect, cx: &mut Ctx) -> bool {
        use ratatui::crossterm::event::{MouseButton, MouseEventKind};
        if ev.column < self.side_list.x + self.side_list.width
            && self.side_list.width > 0
            && ev.column >= self.side_list.x
        {
            return match list_mouse(&mut self.cursor, ev, self.side_list, self.demos.len()) {
                ListMouse::Clicked(_, true) => self.act(AgentAction::Run, cx),
                ListMouse::None => false,
                _ => true,
            };
        }
        if follow::wheel(ev.kind, &mut self.back, &mut self.follow) {
            return true;
        }
        match ev.kind {
            MouseEventKind::Down(MouseButton::Left) if self.model.is_some() => {
                if ev.row + 4 >= area.y + area.height {
                    self.typing = true;
                }
                true
            }
            _ => false,
        }
    }

    fn render(&mut self, f: &mut Frame<'_>, area: Rect, focused: bool, cx: &Ctx) {
        let t = &cx.theme;
        let mut note = String::new();
        if let Some(r) = &self.run {
            note = format!(
                "{} · running{}",
                r.label,
                if self.stepping { " · step mode" } else { "" }
            );
        } else if let Some((name, _)) = self.demos.get(self.cursor.selected) {
            // Also the only sign of the selection when the demo column
            // does not fit.
            note = format!(
                "demo {name}{}",
                if self.stepping { " · step mode" } else { "" }
            );
        }
        if self.lines.dropped() > 0 {
            note = format!("{note} · {} older lines dropped", self.lines.dropped())
                .trim_start_matches(" · ")
                .to_string();
        }
        let block = cx.block_for(area, "Agent", &note, focused);
        let inner = block.inner(area);
        f.render_widget(block, area);
        if inner.height == 0 || inner.width == 0 {
            return;
        }
        let side = inner.width >= 60 && inner.height >= 6;
        let main = if side {
            let s = Rect::new(inner.x, inner.y, SIDE_WIDTH, inner.height);
            self.render_side(f, s, focused, cx);
            for y in inner.y..inner.y + inner.height {
                f.buffer_mut()
                    .set_string(inner.x + SIDE_WIDTH, y, "│", t.border);
            }
            Rect::new(
                inner.x + SIDE_WIDTH + 2,
                inner.y,
                inner.width - SIDE_WIDTH - 2,
                inner.height,
            )
        } else {
            inner
        };
        // Bottom rows: the step bar (while a step waits) and the prompt.
        let waiting = self.waiting_for();
        let prompt_h = if self.typing { self.prompt.rows() } else { 0 };
        let bar_h = u16::from(waiting.is_some());
        let sep_h = 1;
        let reserved = (prompt_h + bar_h + sep_h).min(main.height.saturating_sub(1));
        let conv = Rect::new(main.x, main.y, main.width, main.height - reserved);
        self.render_conversation(f, conv, cx);
        let mut y = conv.y + conv.height;
        let bottom = main.y + main.height;
        let w = main.width as usize;
        if let Some(next) = &waiting
            && y < bottom
        {
            let bar = format!("⏸ next: {next} · space step · c continue · x stop");
            let bar = text::truncate(&text::display(&bar), w).into_owned();
            f.buffer_mut()
                .set_string(main.x, y, bar, t.warn.add_modifier(Modifier::BOLD));
            y += 1;
        }
        if y < bottom {
            let label = if self.typing && focused {
                "─ prompt ".to_string()
            } else if self.model.is_some() {
                "─ i to prompt the model ".to_string()
            } else {
                "─ m sets a model URL to prompt one ".to_string()
            };
            let line = format!("{label}{}", "─".repeat(w));
            f.buffer_mut().set_stringn(
                main.x,
                y,
                line,
                w,
                if focused { t.border_focused } else { t.border },
            );
            y += 1;
        }
        if self.typing && y < bottom {
            let pa = Rect::new(main.x, y, main.width, (bottom - y).min(prompt_h));
            let mut st = t.base;
            if !focused {
                st = st.add_modifier(Modifier::DIM);
            }
            let cursor = if focused {
                t.base.add_modifier(Modifier::REVERSED)
            } else {
                st
            };
            self.prompt.render(f, pa, st, t.muted, cursor);
        }
    }
}

impl TaskPane for AgentPane {
    const ID: &'static str = ID;
    type Msg = Msg;

    fn on_msg(&mut self, msg: Msg, cx: &mut Ctx) {
        match &msg {
            Msg::Setup(id, lines) if self.run.as_ref().is_some_and(|r| r.id == *id) => {
                for l in lines {
                    self.push(LineKind::Info, &format!("setup: {l}"));
                }
            }
            Msg::Started(id, handle) => {
                let Some(run) = self.run.as_mut().filter(|r| r.id == *id) else {
                    handle.stop();
                    return;
                };
                if run.stop_requested {
                    handle.stop();
                }
                // Step mode may have been switched while it opened.
                handle.step_control().set_stepping(self.stepping);
                run.handle = Some(handle.clone());
                let s = run.session.clone();
                if s != cx.session {
                    cx.effect(Effect::SelectSession(s));
                }
            }
            Msg::Events(id, batch) if self.run.as_ref().is_some_and(|r| r.id == *id) => {
                for r in batch {
                    match r {
                        AgentReceived::Event(env) => self.on_agent_event(&env.event),
                        AgentReceived::Missed(n) => self.push(
                            LineKind::Info,
                            &format!("({n} agent events were dropped: the pane fell behind)"),
                        ),
                    }
                }
            }
            Msg::Done(id, fin) if self.run.as_ref().is_some_and(|r| r.id == *id) => {
                self.finish(fin, cx);
            }
            _ => {}
        }
    }
}

impl AgentPane {
    fn ask_model(&mut self, cx: &mut Ctx) {
        // No half value to accept by mistake: the current setting, else
        // an empty field under a title with a complete example.
        let initial = self
            .model
            .as_ref()
            .map(|m| format!("{} {}", m.url, m.model))
            .unwrap_or_default();
        self.ask_model_with(cx, initial);
    }

    fn ask_model_with(&mut self, cx: &mut Ctx, initial: String) {
        cx.effect(Effect::Prompt {
            pane: ID,
            title: MODEL_TITLE.into(),
            initial,
            tag: DialogTag::AgentModel,
        });
    }
}
