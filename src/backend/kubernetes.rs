//! The Kubernetes backend (kube-rs): one Pod and one PVC per workspace
//! (docs/contract.md §7.6, without its Python gateway and bootstrap).
//!
//! * **Names** from the workspace id with a hash of the exact id, so
//!   distinct ids never share a Pod or PVC, and label values that are
//!   always valid; the raw id lives in an annotation (module `names`,
//!   docs/contract.md §11 point 27).
//! * **Provision**: the namespace is created when missing; the PVC
//!   (`ReadWriteOnce`) holds `/workspace` and outlives the Pod; the Pod
//!   runs `sleep infinity` in container `workspace` with the PVC mounted
//!   at `/workspace`. Waiting for `Running` backs off from 250 ms to 2 s
//!   and fails at once with the Pod's own reason on `ImagePullBackOff`,
//!   `ErrImagePull`, `InvalidImageName`, `CrashLoopBackOff` or
//!   `CreateContainerConfigError`, and on an `Unschedulable` scheduling
//!   condition once it has lasted `unschedulable_grace_secs` (a node
//!   being added by an autoscaler is worth waiting for).
//! * **Reattach** by the derived names (checked against the id
//!   annotation): a `Running` or `Pending` Pod is reused, a terminating
//!   one awaited, a Pod in any other phase deleted and recreated — the PVC
//!   and so the files are always kept.
//! * **Exec** over the exec websocket (module `exec`): `v5.channel.k8s.io`
//!   with `v4` fallback, streamed output, exit code from the status
//!   channel, timeouts that kill the process tree in the Pod, and a
//!   background job that cannot hold a finished command's call open.
//! * **Terminal** (module `pty`): an exec with `tty=true`, resized
//!   through the websocket's resize channel (4), killed by its marker.
//! * **Files** by small scripts over exec, one round trip each (module
//!   `files`). Every one of them — read, write, append, create, list,
//!   stat, remove, rename, mkdir and the tar transfers — starts with the
//!   same check, which resolves its paths link by link and refuses
//!   ([`BackendError::Escapes`](super::BackendError::Escapes)) a path
//!   under `/workspace` that a link leads out of, as bubblewrap and Docker
//!   do on the host.
//! * **Events** ([`K8sEvent`]: objects, Pod phases, problems, execs) go to
//!   the [`KubernetesProvisioner::with_events`] sink and, as
//!   [`BackendNotice`](super::BackendNotice)s, to the sink the workspace
//!   manager sets
//!   ([`Provisioner::set_notice_sink`](super::Provisioner::set_notice_sink)),
//!   which puts them on its event bus.
//! * **Suspend** deletes the Pod and keeps the PVC (the next attach
//!   recreates the Pod on the same files); **destroy** deletes both;
//!   **list** shows every labelled PVC, with or without a Pod.
//!
//! RBAC the credentials need in the namespace: `get`, `list`, `create`,
//! `delete` on `pods` and `persistentvolumeclaims`, `create` (and `get`)
//! on `pods/exec`; plus `get`/`create` on `namespaces` when wsbench should
//! create the namespace (without them, an existing namespace is assumed).

mod api;
mod channel;
mod events;
mod exec;
mod files;
mod health;
pub mod names;
mod options;
mod provision;
mod pty;
mod sandbox;
mod tarball;

pub use self::api::connect;
pub use self::events::{EventSink, K8sEvent};
pub(crate) use self::options::CONTAINER;
pub use self::options::{DEFAULT_IMAGE, ImagePullPolicy, KubernetesOptions, Resources, VOLUME};
pub use self::provision::KubernetesProvisioner;
pub use self::sandbox::KubernetesSandbox;
