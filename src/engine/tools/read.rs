//! The Read tool (placeholder being replaced).

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolResult};

/// The Read tool.
pub struct Read;

#[async_trait]
impl Tool for Read {
    fn name(&self) -> &'static str {
        "Read"
    }
    fn description(&self) -> &'static str {
        "Read"
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
