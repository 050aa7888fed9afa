//! Skills (placeholder being replaced).

use super::workspace::{Workspace, WsResult};

impl Workspace {
    pub(crate) async fn migrate_skills(&self) -> WsResult<()> {
        Ok(())
    }
    pub(crate) async fn seed_skills(&self) -> WsResult<()> {
        Ok(())
    }
}
