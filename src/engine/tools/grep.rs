//! The Grep tool (placeholder being replaced).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolResult};

/// The Grep tool.
pub struct Grep;

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        "Grep"
    }
    fn description(&self) -> &'static str {
        "Grep"
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
