//! What happens to a Pod without the client asking (issue 15): an
//! operator's `kubectl delete pod --force`, the kubelet evicting it, its
//! container ending, its PVC removed with it. A child module of the stub
//! so it can reach the store; the Pod's running execs are not killed (a
//! test makes its next call after the switch).

use serde_json::json;

use super::Stub;

impl Stub {
    /// Removes Pod `name` at once, as `kubectl delete pod --grace-period=0
    /// --force` does; exec then answers 404. Its PVC stays.
    pub fn delete_pod_behind(&self, ns: &str, name: &str) {
        let key = (ns.to_string(), name.to_string());
        let removed = self.inner.store.lock().unwrap().pods.remove(&key);
        assert!(removed.is_some(), "no pod {ns}/{name} to delete");
        let _ = std::fs::remove_dir_all(self.inner.pod_tmp(ns, name));
    }

    /// Removes PVC `name` and its data at once (a namespace cleaned up
    /// with its Pod already gone).
    pub fn delete_pvc_behind(&self, ns: &str, name: &str) {
        let key = (ns.to_string(), name.to_string());
        let removed = self.inner.store.lock().unwrap().pvcs.remove(&key);
        assert!(removed.is_some(), "no pvc {ns}/{name} to delete");
        let _ = std::fs::remove_dir_all(self.inner.pvc_dir(ns, name));
    }

    /// Ends Pod `name` as the kubelet reports it: `"Evicted"` (phase
    /// Failed, reason Evicted), `"Failed"` (OOMKilled) or `"Succeeded"`
    /// (its container exited 0). Exec then answers 400 (not running).
    pub fn end_pod_behind(&self, ns: &str, name: &str, how: &'static str) {
        assert!(matches!(how, "Evicted" | "Failed" | "Succeeded"), "{how}");
        let key = (ns.to_string(), name.to_string());
        let mut store = self.inner.store.lock().unwrap();
        let o = store.pods.get_mut(&key).expect("a pod to end");
        o.value["metadata"]["annotations"]["stub/bad"] = json!(how);
    }
}
