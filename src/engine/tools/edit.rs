//! The Edit tool (placeholder being replaced).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolResult};

/// The Edit tool.
pub struct Edit;

#[async_trait]
impl Tool for Edit {
    fn name(&self) -> &'static str {
        "Edit"
    }
    fn description(&self) -> &'static str {
        "Edit"
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
