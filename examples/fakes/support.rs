//! The suite's fakes (`tests/it/support/`), included by path under the
//! module name they have there, so their `crate::support::…` paths hold.

#[path = "../../tests/it/support/behind.rs"]
pub mod behind;
#[path = "../../tests/it/support/fake_daytona.rs"]
pub mod fake_daytona;
#[path = "../../tests/it/support/fake_daytona_pty.rs"]
pub mod fake_daytona_pty;
#[path = "../../tests/it/support/fake_e2b.rs"]
pub mod fake_e2b;
#[path = "../../tests/it/support/fake_e2b_pty.rs"]
pub mod fake_e2b_pty;
#[path = "../../tests/it/support/fake_opensandbox.rs"]
pub mod fake_opensandbox;
#[path = "../../tests/it/support/fake_opensandbox_session.rs"]
pub mod fake_opensandbox_session;
#[path = "../../tests/it/support/fake_pty.rs"]
pub mod fake_pty;
#[path = "../../tests/it/support/fake_sandbox.rs"]
pub mod fake_sandbox;
#[path = "../../tests/it/support/k8s_stub.rs"]
pub mod k8s_stub;
