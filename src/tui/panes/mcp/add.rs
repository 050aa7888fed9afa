//! The MCP pane's add form: `NAME COMMAND ARGS…` or `NAME URL`, parsed
//! here, added by the engine; a refused entry reopens the form with
//! what was typed.

use crate::engine::mcp::McpDecl;
use crate::tui::action::{DialogTag, Effect, Level};
use crate::tui::pane::Ctx;

use super::{ID, McpPane, Msg};

pub(super) const ADD_TITLE: &str = "Add MCP server: NAME COMMAND ARGS… or NAME URL";

/// Opens the add form again with what was typed and, as its title, why
/// it was refused — without the engine's "MCP server `x` cannot be
/// added: " lead-in, which the narrow title would spend its room on (the
/// toast shows the whole text).
pub(super) fn reopen_add(cx: &mut Ctx, typed: &str, error: &str) {
    let first = error.lines().next().unwrap_or(error);
    cx.toast(Level::Error, first.to_string());
    let why = first
        .find(" cannot be added: ")
        .map_or(first, |i| &first[i + " cannot be added: ".len()..]);
    cx.effect(Effect::Prompt {
        pane: ID,
        title: format!("✗ {why}"),
        initial: typed.to_string(),
        tag: DialogTag::McpAdd,
    });
}

/// Parses the add form: `NAME URL` (http, or SSE when the path ends in
/// `/sse`) or `NAME COMMAND ARGS…` (stdio; shell-style quoting).
pub fn parse_add(input: &str) -> Result<McpDecl, String> {
    let words = shlex::split(input.trim())
        .ok_or_else(|| "unbalanced quotes in the command line".to_string())?;
    let mut it = words.into_iter();
    let name = it
        .next()
        .ok_or_else(|| "give a name, then a command or a URL".to_string())?;
    let target = it.next().ok_or_else(|| {
        format!("`{name}`: give a stdio command or an http(s) URL after the name")
    })?;
    let rest: Vec<String> = it.collect();
    let decl = if target.starts_with("http://") || target.starts_with("https://") {
        if !rest.is_empty() {
            return Err(format!(
                "`{name}`: nothing may follow the URL (got `{}`)",
                rest.join(" ")
            ));
        }
        McpDecl::http(name, target, false)
    } else {
        McpDecl::stdio(name, target, rest)
    };
    decl.validate().map_err(|e| e.to_string())?;
    Ok(decl)
}

impl McpPane {
    /// Adds the server typed into the add form (nothing when it is empty).
    pub(super) fn add_from_form(&mut self, input: &str, cx: &mut Ctx) {
        if input.trim().is_empty() {
            return;
        }
        match parse_add(input) {
            Ok(decl) => {
                let ws = cx.ws.clone();
                let (agent, session) = (cx.agent.clone(), cx.session.clone());
                let name = decl.name.clone();
                self.busy.insert(name.clone());
                let typed = input.to_string();
                cx.spawn::<McpPane>(async move {
                    match ws.mcp().add(decl, &agent, &session, false).await {
                        Ok(_) => {
                            let m = format!("added `{name}`: press s to start it");
                            Msg::Acted(name, "add", Ok(m))
                        }
                        Err(e) => Msg::AddRefused(name, typed, e.to_string()),
                    }
                });
            }
            Err(e) => reopen_add(cx, input, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::mcp::McpTransport;

    #[test]
    fn add_form_takes_a_command_or_a_url() {
        let d = parse_add("fs npx -y '@scope/server fs' /tmp").unwrap();
        assert_eq!(d.name, "fs");
        assert_eq!(d.transport(), McpTransport::Stdio);
        let d = parse_add("docs http://127.0.0.1:9/mcp").unwrap();
        assert_eq!(d.transport(), McpTransport::StreamableHttp);
        let d = parse_add("old https://h/sse").unwrap();
        assert_eq!(d.transport(), McpTransport::Sse);
        assert!(
            parse_add("lonely")
                .unwrap_err()
                .contains("command or an http")
        );
        assert!(parse_add("x http://h/mcp extra").is_err());
        assert!(parse_add("x 'open").unwrap_err().contains("quotes"));
        assert!(parse_add("").is_err());
    }
}
