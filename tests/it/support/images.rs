//! What the sandboxed-backend tests need from the machine: a working
//! `bwrap`, a Docker daemon, and the locally built test images
//! (`tests/build-test-image.sh`; no registry is reachable here).

use wsbench::backend::Sandbox;
use wsbench::backend::bubblewrap::{BubblewrapOptions, BubblewrapSandbox};
use wsbench::backend::docker::connect;

/// The built-in `docker` profile's image, built locally by the script.
pub const DEBIAN_IMAGE: &str = "debian:bookworm-slim";

/// An image without bash (case C12), built from busybox-static.
pub const BUSYBOX_IMAGE: &str = "wsbench-test/busybox:latest";

/// `Ok` when `bwrap` can build a sandbox here; else why not.
pub async fn bwrap_ready() -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sb = BubblewrapSandbox::open(dir.path(), BubblewrapOptions::default())
        .map_err(|e| e.to_string())?;
    sb.probe()
        .await
        .map_err(|e| format!("bwrap cannot run here ({e}); apt-get install bubblewrap"))?;
    // The sandbox must be usable for the suite's shell commands too.
    let out = sb
        .exec(wsbench::backend::ExecRequest::shell("true"), None)
        .await
        .map_err(|e| e.to_string())?;
    if out.exit_code == Some(0) {
        Ok(())
    } else {
        Err(format!(
            "`sh -c true` in bwrap ended with {:?}",
            out.exit_code
        ))
    }
}

/// `Ok` when the Docker daemon answers and `image` is present locally.
pub async fn docker_ready(image: &str) -> Result<(), String> {
    let docker = connect(None).await.map_err(|e| e.to_string())?;
    docker.inspect_image(image).await.map_err(|e| {
        format!("image {image} is missing ({e}); build it with tests/build-test-image.sh")
    })?;
    Ok(())
}
