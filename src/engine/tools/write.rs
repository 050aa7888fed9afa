//! The Write tool (placeholder being replaced).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolResult};

/// The Write tool.
pub struct Write;

#[async_trait]
impl Tool for Write {
    fn name(&self) -> &'static str {
        "Write"
    }
    fn description(&self) -> &'static str {
        "Write"
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
