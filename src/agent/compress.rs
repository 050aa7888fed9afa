//! Keeping the context small: cap the images it carries and compress
//! old turns into a summary when it grows past the policy.

use super::*;

impl Agent {
    /// Moves images past `max_image_num` (counted from the newest) out of
    /// the context: base64 payloads go to `data/`, and each block is
    /// replaced by a reminder naming where the image is (docs/contract.md §6).
    pub(super) async fn cap_images(&mut self) {
        let max = self.config.policy.max_image_num;
        // (message, block, block inside a tool result), newest first.
        let mut found: Vec<(usize, usize, Option<usize>)> = Vec::new();
        let is_image =
            |b: &Block| matches!(b, Block::Data(d) if d.source.media_type().starts_with("image/"));
        for (mi, m) in self.context.iter().enumerate().rev() {
            for (bi, b) in m.content.iter().enumerate().rev() {
                if is_image(b) {
                    found.push((mi, bi, None));
                } else if let Block::ToolResult(r) = b
                    && let ToolOutput::Blocks(inner) = &r.output
                {
                    for (ii, ib) in inner.iter().enumerate().rev() {
                        if is_image(ib) {
                            found.push((mi, bi, Some(ii)));
                        }
                    }
                }
            }
        }
        if found.len() <= max {
            return;
        }
        let mut changed = false;
        for (mi, bi, ii) in found.into_iter().skip(max) {
            let slot: &Block = match ii {
                None => &self.context[mi].content[bi],
                Some(ii) => match &self.context[mi].content[bi] {
                    Block::ToolResult(r) => match &r.output {
                        ToolOutput::Blocks(inner) => &inner[ii],
                        ToolOutput::Text(_) => continue,
                    },
                    _ => continue,
                },
            };
            let Block::Data(data) = slot else { continue };
            let data = data.clone();
            let offloaded = match self.ws.offload().data(&data).await {
                Ok(d) => d,
                Err(e) => {
                    self.emit(AgentEvent::Error {
                        kind: "internal".into(),
                        message: format!("image {} could not be offloaded: {e}", data.id),
                    });
                    continue;
                }
            };
            let DataSource::Url { url, .. } = &offloaded.source else {
                continue;
            };
            if let DataSource::Base64 { data: b64, .. } = &data.source {
                self.emit(AgentEvent::OffloadWritten {
                    kind: AgentOffload::Image,
                    path: url.clone(),
                    size: (b64.len() as u64 / 4) * 3,
                });
            }
            let path = self
                .ws
                .layout()
                .resolve_reference(url)
                .unwrap_or_else(|_| url.clone());
            let name = data
                .name
                .as_deref()
                .map(|n| format!(" '{n}'"))
                .unwrap_or_default();
            let reminder = Block::Text(TextBlock::new(format!(
                "<system-reminder>The image{name} was moved out of the context to keep at most {max} images; it is stored at '{url}' ('{path}').</system-reminder>"
            )));
            match ii {
                None => self.context[mi].content[bi] = reminder,
                Some(ii) => {
                    if let Block::ToolResult(r) = &mut self.context[mi].content[bi]
                        && let ToolOutput::Blocks(inner) = &mut r.output
                    {
                        inner[ii] = reminder;
                    }
                }
            }
            changed = true;
        }
        if changed {
            self.save_state().await;
        }
    }

    /// Compresses the oldest messages when the request passes
    /// `trigger_ratio` of the window (docs/contract.md §6): they are appended to
    /// `context.jsonl`, and a summary naming that file replaces them. A
    /// failure leaves the context as it was.
    pub(super) async fn maybe_compress(&mut self, cancel: &CancellationToken) {
        let policy = self.config.policy.clone();
        let counter = policy.counter();
        let system = self.system_prompt().await;
        let schemas = self.tools.schemas();
        let (fixed, total) = self.estimate(&system, &schemas);
        if total < policy.trigger_tokens() {
            return;
        }
        if self.context.is_empty() {
            self.emit(AgentEvent::Error {
                kind: "invalid_request".into(),
                message: format!(
                    "the system prompt and summary alone (~{fixed} tokens) pass the compression threshold ({} tokens); nothing can be compressed",
                    policy.trigger_tokens()
                ),
            });
            return;
        }
        let (mut compress, mut keep) =
            context::split_for_compression(&self.context, fixed, policy.reserve_tokens(), counter);
        if compress.is_empty() {
            (compress, keep) = context::split_for_compression(&self.context, fixed, 0, counter);
        }
        if compress.is_empty() {
            return;
        }
        let mut messages = compress.clone();
        messages.push(Msg::text("user", "user", policy.compression_prompt.clone()));
        let request = ModelRequest {
            system,
            summary: self.summary.clone(),
            messages,
            tools: Vec::new(),
        };
        let (fields, fallback) = match self
            .model
            .summarize(&request, &context::summary_schema(), cancel)
            .await
        {
            Ok(f) => (f, false),
            Err(ModelError::Cancelled) => return,
            Err(e) => {
                self.emit(AgentEvent::Error {
                    kind: e.error_type().into(),
                    message: format!(
                        "the model could not write the compression summary ({e}); a summary made from the messages is used"
                    ),
                });
                (context::mechanical_summary(&compress), true)
            }
        };
        let new_lines: Vec<Msg> = compress
            .iter()
            .filter(|m| !self.offloaded.contains(&hash_msg(m)))
            .cloned()
            .collect();
        let path = match self
            .ws
            .offload()
            .context(&self.config.session, &new_lines)
            .await
        {
            Ok(p) => p,
            Err(e) => {
                self.emit(AgentEvent::Error {
                    kind: "internal".into(),
                    message: format!(
                        "compression skipped: the messages could not be offloaded: {e}"
                    ),
                });
                return;
            }
        };
        self.offloaded.extend(new_lines.iter().map(hash_msg));
        let mut summary = policy.format_summary(&fields);
        summary.push_str(&context::compression_reminder(&path));
        self.summary = Some(summary.clone());
        self.context = keep;
        let (_, after) = self.estimate(&request.system, &schemas);
        self.emit(AgentEvent::OffloadWritten {
            kind: AgentOffload::Context,
            path: path.clone(),
            size: new_lines.len() as u64,
        });
        self.emit(AgentEvent::CompressionDone {
            path,
            compressed_messages: compress.len(),
            kept_messages: self.context.len(),
            tokens_before: total,
            tokens_after: after,
            summary,
            fallback,
        });
        self.save_state().await;
    }
}
