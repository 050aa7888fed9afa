//! The Glob tool (placeholder being replaced).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolResult};

/// The Glob tool.
pub struct Glob;

#[async_trait]
impl Tool for Glob {
    fn name(&self) -> &'static str {
        "Glob"
    }
    fn description(&self) -> &'static str {
        "Glob"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn read_only(&self) -> bool {
        false
    }
    async fn call(&self, _ctx: &ToolContext<'_>, _args: Value) -> ToolResult {
        ToolResult::error("PLACEHOLDER")
    }
}
