#!/usr/bin/env bash
# Builds the Docker images the backend tests use, without any registry (none
# is reachable on the CI machines):
#
#   debian:bookworm-slim     `debootstrap --variant=minbase bookworm` from the
#                            Debian mirror apt already uses, then `docker
#                            import`. The built-in `docker` profile's default
#                            image, so it works here unchanged.
#   wsbench-test/busybox     /bin/busybox from Debian's busybox-static and its
#                            applet links: an image without bash (case C12).
#
# The root-fs tarballs are cached in $WSBENCH_IMAGE_CACHE (default
# $HOME/.cache/wsbench-ci), so a later run only re-imports them (a few
# seconds). An image already present in the daemon is left alone; pass
# --force to re-import it.
#
# Needs: root (debootstrap), docker (daemon running), debootstrap,
# busybox-static. Exits non-zero with a message naming what is missing.
set -euo pipefail

FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1

CACHE=${WSBENCH_IMAGE_CACHE:-$HOME/.cache/wsbench-ci}
DEBIAN_IMAGE=${WSBENCH_DEBIAN_IMAGE:-debian:bookworm-slim}
BUSYBOX_IMAGE=${WSBENCH_BUSYBOX_IMAGE:-wsbench-test/busybox:latest}
DEBIAN_TAR=$CACHE/debian-bookworm-minbase.tar.gz
BUSYBOX_TAR=$CACHE/busybox-static.tar.gz

die() { echo "build-test-image: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 is missing (apt-get install $2)"; }

need docker docker.io
docker info >/dev/null 2>&1 || die "the Docker daemon does not answer (start it: dockerd --bridge=none --iptables=false &)"
mkdir -p "$CACHE"

have_image() { [ "$FORCE" = 0 ] && docker image inspect "$1" >/dev/null 2>&1; }

# The first plain Debian mirror apt is configured with (deb822 `URIs:` or a
# one-line `deb URL SUITE ...` entry); security mirrors carry no full suite.
apt_mirror() {
    {
        grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{for (i = 2; i <= NF; i++) print $i}' || true
        grep -hsE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
            sed -E 's/\[[^]]*\]//' | awk '{print $2}' || true
    } 2>/dev/null | grep -v -- '-security' | grep -E '^https?://' | head -n1 || true
}

build_debian_tar() {
    need debootstrap debootstrap
    [ "$(id -u)" = 0 ] || die "debootstrap needs root"
    local mirror
    mirror=${WSBENCH_DEBIAN_MIRROR:-$(apt_mirror)}
    [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list*; set WSBENCH_DEBIAN_MIRROR"
    local root
    root=$(mktemp -d /tmp/wsbench-rootfs.XXXXXX)
    trap 'rm -rf "$root"' RETURN
    echo "== debootstrap --variant=minbase bookworm from $mirror"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
        die "debootstrap failed; see $CACHE/debootstrap.log"
    # What the official slim image drops too: package caches and lists.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
    tar --numeric-owner -C "$root" -czf "$DEBIAN_TAR.tmp" .
    mv "$DEBIAN_TAR.tmp" "$DEBIAN_TAR"
}

build_busybox_tar() {
    local bb=/bin/busybox
    [ -x "$bb" ] || die "$bb is missing (apt-get install busybox-static)"
    # ldd fails on a static binary; a dynamic busybox would not run in an empty image.
    if ldd "$bb" >/dev/null 2>&1; then die "$bb is not static (apt-get install busybox-static)"; fi
    local root
    root=$(mktemp -d /tmp/wsbench-busybox.XXXXXX)
    trap 'rm -rf "$root"' RETURN
    mkdir -p "$root"/bin "$root"/tmp "$root"/workspace "$root"/proc "$root"/dev "$root"/etc
    chmod 1777 "$root"/tmp
    cp "$bb" "$root"/bin/busybox
    for applet in $("$bb" --list); do
        [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
    done
    printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root"/etc/passwd
    printf 'root:x:0:\n' >"$root"/etc/group
    tar --numeric-owner -C "$root" -czf "$BUSYBOX_TAR.tmp" .
    mv "$BUSYBOX_TAR.tmp" "$BUSYBOX_TAR"
}

if have_image "$DEBIAN_IMAGE"; then
    echo "== $DEBIAN_IMAGE present"
else
    [ -s "$DEBIAN_TAR" ] || build_debian_tar
    echo "== docker import $DEBIAN_TAR as $DEBIAN_IMAGE"
    docker import --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$DEBIAN_TAR" "$DEBIAN_IMAGE" >/dev/null
fi

if have_image "$BUSYBOX_IMAGE"; then
    echo "== $BUSYBOX_IMAGE present"
else
    [ -s "$BUSYBOX_TAR" ] || build_busybox_tar
    echo "== docker import $BUSYBOX_TAR as $BUSYBOX_IMAGE"
    docker import --change 'CMD ["sh"]' --change 'ENV PATH=/bin' "$BUSYBOX_TAR" "$BUSYBOX_IMAGE" >/dev/null
fi
