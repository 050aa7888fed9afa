//! Copying: through a native clipboard tool, else (or by config) as an
//! OSC 52 sequence the terminal loop writes.

use super::{App, HostRequest};
use crate::tui::action::{AppMsg, Level};
use crate::tui::config::ClipboardMode;

impl App {
    pub(super) fn copy(&mut self, text: String) {
        let mode = self.cx.config.clipboard;
        let max = self.cx.config.osc52_max_bytes;
        let n = text.chars().count();
        match mode {
            ClipboardMode::Off => {
                self.toast = Some(
                    self.new_toast(Level::Warn, "copying is off (clipboard = \"off\")".into()),
                );
            }
            ClipboardMode::Osc52 => self.osc52(text, max),
            ClipboardMode::Auto | ClipboardMode::Native => {
                let tx = self.cx.tx.clone();
                tokio::task::spawn_blocking(move || {
                    let msg = match crate::tui::clipboard::copy_native(&text) {
                        Ok(tool) => {
                            AppMsg::Toast(Level::Info, format!("copied {n} characters ({tool})"))
                        }
                        Err(e) if mode == ClipboardMode::Auto => {
                            let _ = e;
                            AppMsg::Osc52(text)
                        }
                        Err(e) => AppMsg::Toast(Level::Error, e),
                    };
                    let _ = tx.blocking_send(msg);
                });
            }
        }
    }

    pub(super) fn osc52(&mut self, text: String, max: usize) {
        let n = text.chars().count();
        match crate::tui::clipboard::osc52(&text, max) {
            Some(seq) => {
                self.requests.push(HostRequest::Osc52(seq));
                self.toast =
                    Some(self.new_toast(Level::Info, format!("copied {n} characters (OSC 52)")));
            }
            None => {
                self.toast = Some(self.new_toast(
                    Level::Error,
                    format!(
                        "too long to copy through OSC 52 ({n} characters; osc52_max_bytes = {max})"
                    ),
                ))
            }
        }
    }
}
