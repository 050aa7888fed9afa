//! The Docker backend (bollard): one container per workspace (contract
//! §7.3, without its image build and Python gateway).
//!
//! * **Image** per profile, default `debian:bookworm-slim`; pulled with
//!   progress events when absent ([`PullPolicy`]); with no registry
//!   reachable the error names the image and how to provide it locally.
//! * **Container** `wsbench-[<profile>-]<id>`, labelled with
//!   [`labels`] (workspace id, user, agent, profile) plus
//!   the storage facts needed to reattach; PID 1 is Docker's init running
//!   `sleep infinity` (it reaps what a killed command leaves behind);
//!   `no-new-privileges`; memory / CPU / PID limits; network mode from the
//!   profile (`none` by default — never a bridge here).
//! * **Storage** ([`Storage`]): a host directory bind-mounted at
//!   `/workspace` (default), a named volume, or nothing (ephemeral).
//!   With a bind mount the file tools work on the host directory after the
//!   same confinement check as bubblewrap ([`HostDir`]), and Glob/Grep run
//!   in-process; otherwise they go through the archive API and small exec
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
//!   [`DockerProvisioner::with_events`] sink and, as [`BackendNotice`]s
//!   about their workspace, to the sink the workspace manager sets
//!   ([`Provisioner::set_notice_sink`]), which puts them on its event bus
//!   (the TUI's Logs pane).

mod api;
mod events;
mod exec;
mod files;
mod options;
mod provision;
mod sandbox;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveVolumeOptionsBuilder, StopContainerOptionsBuilder,
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncRead;
use tokio::sync::OnceCell;

use self::exec::ExecTarget;
use self::files::ContainerFiles;
use super::host::{HostDir, sanitize_segment};
use super::{
    BackendError, BackendKind, BackendNotice, BackendResult, ByteRange, Capabilities, ExecOutcome,
    ExecRequest, FileStat, NoticeLevel, NoticeSink, OutputSink, Process, ProvisionSpec,
    Provisioner, ProvisionerCapabilities, Sandbox, SandboxInfo, SandboxState, SpawnRequest, Watch,
    labels,
};

pub use self::api::*;
pub use self::events::*;
pub use self::options::*;
pub use self::provision::*;
pub use self::sandbox::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_deserialize_strictly_with_defaults() {
        let o: DockerOptions = toml::from_str("").unwrap();
        assert_eq!(o, DockerOptions::default());
        assert_eq!(o.image, DEFAULT_IMAGE);
        assert_eq!(o.network, "none");
        let o: DockerOptions = toml::from_str(
            "image = \"busybox\"\nstorage = \"volume\"\nsuspend = \"pause\"\nmemory = \"512m\"\ncpus = 1.5\npull = \"never\"",
        )
        .unwrap();
        assert_eq!(o.storage, Storage::Volume);
        assert_eq!(o.suspend, SuspendMode::Pause);
        assert_eq!(o.pull, PullPolicy::Never);
        let e = toml::from_str::<DockerOptions>("imgae = \"x\"").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let e = toml::from_str::<DockerOptions>("storage = \"nfs\"").unwrap_err();
        assert!(e.to_string().contains("unknown variant"), "{e}");
        let j: DockerOptions = serde_json::from_str(r#"{"network": "host"}"#).unwrap();
        assert_eq!(j.network, "host");
    }

    #[test]
    fn memory_sizes() {
        assert_eq!(parse_memory("512m").unwrap(), 512 << 20);
        assert_eq!(parse_memory("2G").unwrap(), 2 << 30);
        assert_eq!(parse_memory("1000").unwrap(), 1000);
        assert_eq!(parse_memory("1.5k").unwrap(), 1536);
        assert!(parse_memory("lots").is_err());
        assert!(parse_memory("-1m").is_err());
    }

    #[test]
    fn events_become_notices_with_levels_and_one_line_messages() {
        let cid = "0123456789abcdef0123";
        let pull = |current| DockerEvent::PullProgress {
            image: "debian:bookworm-slim".into(),
            status: "Downloading".into(),
            layer: Some("1a2b".into()),
            current,
            total: Some(100),
        };
        let n = pull(Some(40)).notice("ws-1");
        assert_eq!(
            (n.workspace_id.as_str(), n.source.as_str(), n.level),
            ("ws-1", "docker", NoticeLevel::Debug)
        );
        assert_eq!(
            n.message,
            "pulling debian:bookworm-slim: 1a2b: Downloading (40/100 bytes)"
        );
        assert_eq!(pull(None).level(), NoticeLevel::Info);
        let created = DockerEvent::Created {
            workspace_id: "ws-1".into(),
            container: cid.into(),
            name: "wsbench-ws-1".into(),
        };
        assert_eq!(created.level(), NoticeLevel::Info);
        assert_eq!(
            created.message(),
            "created container wsbench-ws-1 (0123456789ab)"
        );
        for (ev, text) in [
            (
                DockerEvent::Stopped {
                    container: cid.into(),
                },
                "stopped container 0123456789ab",
            ),
            (
                DockerEvent::Removed {
                    container: "short".into(),
                },
                "removed container short",
            ),
        ] {
            assert_eq!(
                (ev.level(), ev.message().as_str()),
                (NoticeLevel::Info, text)
            );
        }
        let exec = DockerEvent::ExecStarted {
            container: cid.into(),
            exec_id: "e".into(),
            argv: vec!["sh".into(), "-c".into(), "x".repeat(500)],
        };
        assert_eq!(exec.level(), NoticeLevel::Debug);
        assert!(exec.message().ends_with('…') && exec.message().chars().count() < 200);
        let problem = DockerEvent::Problem {
            action: "create".into(),
            message: "image `x` is not present locally".into(),
        };
        assert_eq!(problem.level(), NoticeLevel::Error);
        assert_eq!(
            problem.message(),
            "create failed: image `x` is not present locally"
        );
    }

    #[test]
    fn names_are_docker_safe_and_distinct() {
        let p = DockerProvisioner::new(DockerOptions::default());
        assert_eq!(p.container_name("abc"), "wsbench-abc");
        assert_ne!(p.container_name("a/b"), p.container_name("a_b"));
        let q = DockerProvisioner::new(DockerOptions::default()).with_profile("docker");
        assert_eq!(q.container_name("abc"), "wsbench-docker-abc");
        let f = q.filters(Some("abc"));
        assert_eq!(
            f["label"],
            vec![
                "wsbench.workspace.id=abc".to_string(),
                "wsbench.profile=docker".to_string()
            ]
        );
    }
}
