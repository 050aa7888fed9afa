//! Switches that change a cloud fake's sandbox behind the client's back,
//! as the service does on its own (issue 15): it deletes an expired
//! sandbox, stops an idle one (Daytona's auto-stop), archives it, or
//! pauses it (OpenSandbox). The E2B fake has its own
//! (`FakeE2b::delete_behind`, `FakeE2b::pause_behind`). Processes of the
//! sandbox die in every case; its files stay unless it was deleted.

use crate::support::fake_daytona::FakeDaytona;
use crate::support::fake_opensandbox::FakeOpenSandbox;

/// What a service can do to one of its sandboxes without being asked.
pub trait Behind {
    /// Deletes sandbox `id` (expired, removed by an operator): its API and
    /// toolbox/execd then answer 404.
    fn delete_behind(&self, id: &str);
    /// Stops or pauses sandbox `id` the way the service does when it is
    /// idle: its processes die, its files stay, and the toolbox/execd
    /// refuses requests until it is started or resumed.
    fn stop_behind(&self, id: &str);
}

impl Behind for FakeDaytona {
    fn delete_behind(&self, id: &str) {
        if let Some(sb) = self.state.sandboxes.lock().unwrap().remove(id) {
            sb.boxed.kill_all();
        }
    }

    /// Daytona's auto-stop: state `stopped`.
    fn stop_behind(&self, id: &str) {
        set_daytona(self, id, "stopped");
    }
}

/// Daytona's auto-archive (a stopped sandbox moved to object storage):
/// state `archived`; `start` brings it back with its files.
pub fn archive_behind(f: &FakeDaytona, id: &str) {
    set_daytona(f, id, "archived");
}

fn set_daytona(f: &FakeDaytona, id: &str, state: &'static str) {
    let mut all = f.state.sandboxes.lock().unwrap();
    let sb = all.get_mut(id).expect("a sandbox to stop");
    sb.state = state;
    sb.boxed.kill_all();
}

impl Behind for FakeOpenSandbox {
    fn delete_behind(&self, id: &str) {
        if let Some(sb) = self.state.sandboxes.lock().unwrap().remove(id) {
            sb.boxed.kill_all();
        }
    }

    /// OpenSandbox pauses (there is no stop): state `Paused`; execd then
    /// answers 503 `SANDBOX_NOT_RUNNING`.
    fn stop_behind(&self, id: &str) {
        let mut all = self.state.sandboxes.lock().unwrap();
        let sb = all.get_mut(id).expect("a sandbox to pause");
        sb.state = "Paused";
        sb.boxed.kill_all();
    }
}
