//! What the backends whose files live in a host directory share (local,
//! bubblewrap, and Docker with a bind mount): the sandbox's view of host
//! directories with links confined to the workspace ([`HostDir`]), host
//! file helpers (stat, atomic write, locked append), watching, and safe
//! file names from ids.

pub mod fs;
pub(crate) mod hostdir;
pub mod names;
pub mod watch;

pub use fs::{
    append_host, atomic_write_host, create_new_host, finish_atomic, new_temp, read_host,
    remove_host, stat_host, stream_to_temp, with_bytes,
};
pub use hostdir::{HostDir, MAX_LINK_HOPS, Mount};
pub use names::sanitize_segment;
pub(crate) use watch::PathMapper;
pub use watch::watch_host;
