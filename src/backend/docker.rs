//! The Docker backend (bollard): one container per workspace (contract
//! §7.3, without its image build and Python gateway).
//!
//! * **Image** per profile, default `debian:bookworm-slim`; pulled with
//!   progress events when absent ([`PullPolicy`]); with no registry
//!   reachable the error names the image and how to provide it locally.
//! * **Container** `wsbench-[<profile>-]<id>`, labelled with
//!   [`labels`](super::labels) (workspace id, user, agent, profile) plus
//!   the storage facts needed to reattach; PID 1 is Docker's init running
//!   `sleep infinity` (it reaps what a killed command leaves behind);
//!   `no-new-privileges`; memory / CPU / PID limits; network mode from the
//!   profile (`none` by default — never a bridge here).
//! * **Storage** ([`Storage`]): a host directory bind-mounted at
//!   `/workspace` (default), a named volume, or nothing (ephemeral).
//!   With a bind mount the file tools work on the host directory after the
//!   same confinement check as bubblewrap
//!   ([`HostDir`](super::host::HostDir)), and Glob/Grep run in-process;
//!   otherwise they go through the archive API and small exec
//!   scripts (module `files`).
//! * **Ownership**: with a bind mount, commands run as the host user's
//!   `uid:gid` (unless [`DockerOptions::user`] says otherwise), so every
//!   file a command creates in `/workspace` belongs to the host user —
//!   readable and removable without the reference's `chown -R` pass on
//!   close (§7.3). As root on the host that is `0:0`. Without a bind
//!   mount, commands run as the image's user.
//! * **Exec** through the API, demultiplexed and streamed, exit code from
//!   `inspect_exec` (C12), timeouts that kill the tree inside the container
//!   (module `exec`).
//! * **Reattach** by label after a restart (start or unpause as needed);
//!   suspend = stop (or pause, [`SuspendMode`]); destroy = remove the
//!   container, its volume and its bind directory.
//! * **Events** ([`DockerEvent`]: pulls, containers created, started,
//!   stopped and removed, execs, problems) go to the
//!   [`DockerProvisioner::with_events`] sink and, as
//!   [`BackendNotice`](super::BackendNotice)s about their workspace, to the
//!   sink the workspace manager sets
//!   ([`Provisioner::set_notice_sink`](super::Provisioner::set_notice_sink)),
//!   which puts them on its event bus (the TUI's Logs pane).

mod api;
mod events;
mod exec;
mod files;
mod join;
mod options;
mod provision;
mod pty;
mod sandbox;
mod subreaper;
mod watchdog;

pub use self::api::connect;
pub use self::events::{DockerEvent, EventSink};
pub(crate) use self::options::parse_memory;
pub use self::options::{
    DEFAULT_IMAGE, DockerOptions, LABEL_USER, PullPolicy, Storage, SuspendMode, default_base_dir,
};
pub use self::provision::DockerProvisioner;
