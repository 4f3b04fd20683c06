#!/usr/bin/env bash
# Build the product's OCI image without Docker or a registry, from pinned inputs:
# - Debian 12 (bookworm) from its mirror, by mmdebstrap: a minimal root filesystem with its
#   python3 (3.11); DEBIAN_MIRROR=https://snapshot.debian.org/archive/debian/<date>/ pins the
#   Debian packages to a day (their versions are listed in dist/image-packages.txt);
# - the Python packages of deploy/image/requirements.lock (`./run lock` writes it), each
#   checked against its sha256, and the project's own wheel;
# - every file's time set to SOURCE_DATE_EPOCH (default: the commit time of HEAD), and the
#   image's creation time too, so that the same inputs give the same image digest.
# Then the build tools are removed again, a non-root user is added, and umoci packs it as an
# OCI image layout, archived as dist/trainjob-multicluster.oci.tar.
# Needs root (chroot), mmdebstrap and umoci (apt-get install mmdebstrap umoci), and the network
# to Debian's mirror and PyPI.
#   Usage: [IMAGE=<registry>/<repository>:<tag>] deploy/image/build.sh
# IMAGE defaults to the chart's image (charts/trainjob-multicluster/values.yaml, the chart's
# appVersion as the tag): the one place that names it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
NAME=trainjob-multicluster
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
IMAGE=${IMAGE:-$(cd "$REPO" && "$PYTHON" -m clusters.chart --image)}
TAG=${IMAGE##*:}
LOCK=$REPO/deploy/image/requirements.lock
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
  SOURCE_DATE_EPOCH=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || stat -c %Y "$REPO/pyproject.toml")
fi
export SOURCE_DATE_EPOCH
[[ $IMAGE == */* && $TAG != "$IMAGE" && $TAG != */* ]] \
  || { echo "error: IMAGE=$IMAGE is not <registry>/<repository>:<tag>" >&2; exit 2; }
DIST=$REPO/dist
OUT=${OUT:-$DIST/$NAME.oci.tar}  # the archive; the bed builds into its cache this way
WORK=$(mktemp -d /tmp/trainjob-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
say() { printf '[image %s] %s\n' "$(date +%T)" "$*" >&2; }
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not installed (apt-get install $tool)" >&2; exit 1; }
done
[[ $(id -u) == 0 ]] || { echo "error: run as root (the build chroots into the image)" >&2; exit 1; }
mkdir -p "$DIST"
start=$(date +%s)

say "wheels: the project's, and its dependencies as locked ($LOCK)"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$WORK/wheels" "$REPO"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --require-hashes \
  --dest "$WORK/wheels" -r "$LOCK"
(cd "$WORK/wheels" && ls *.whl) | sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' | sort > "$DIST/image-requirements.txt"

say "Debian 12 root filesystem with python3 (mmdebstrap)"
mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,ca-certificates \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  bookworm "$WORK/rootfs" "$MIRROR"

say "install the wheels, drop pip and apt's caches, add the non-root user"
cp -r "$WORK/wheels" "$WORK/rootfs/tmp/wheels"
chroot "$WORK/rootfs" env -i PATH=/usr/local/bin:/usr/bin:/bin sh -c 'python3 -m pip install --quiet --no-index --no-deps \
  --no-compile --break-system-packages --root-user-action=ignore /tmp/wheels/*.whl && python3 -m pip check >&2'
chroot "$WORK/rootfs" dpkg-query -W -f '${Package}=${Version}\n' | sort > "$DIST/image-packages.txt"
chroot "$WORK/rootfs" env -i PATH=/usr/bin:/bin sh -c 'apt-get purge -y -qq python3-pip python3-wheel python3-setuptools >/dev/null \
  && apt-get autoremove -y -qq >/dev/null && rm -rf /tmp/wheels /var/lib/apt/lists/* /var/cache/apt/*'
echo "trainjob:x:65532:65532:trainjob:/nonexistent:/usr/sbin/nologin" >> "$WORK/rootfs/etc/passwd"
echo "trainjob:x:65532:" >> "$WORK/rootfs/etc/group"
for cmd in trainjob-dispatcher trainjob-worker-controller trainjob-worker-secret trainjob-kueue-config; do
  [[ -x $WORK/rootfs/usr/local/bin/$cmd ]] || { echo "error: $cmd missing from the image" >&2; exit 1; }
done
# The compiled dependencies (pycurl brings libcurl and OpenSSL of its own) load in the image.
chroot "$WORK/rootfs" env -i PATH=/usr/bin:/bin python3 -c 'import orjson, pycurl; print(pycurl.version)' >&2
# What differs from one build to the next: logs and caches of the build itself, then times.
rm -rf "$WORK/rootfs"/var/log/* "$WORK/rootfs"/var/cache/ldconfig/aux-cache \
  "$WORK/rootfs"/var/lib/dpkg/*-old "$WORK/rootfs"/var/cache/debconf/*-old
# The checks above compiled what they imported (pip installs with --no-compile): no bytecode.
find "$WORK/rootfs/usr/local" -name __pycache__ -type d -prune -exec rm -rf {} +
find "$WORK/rootfs" -depth -newermt "@$SOURCE_DATE_EPOCH" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +

say "OCI image (umoci)"
umoci init --layout "$WORK/oci"
umoci new --image "$WORK/oci:$TAG"
umoci unpack --image "$WORK/oci:$TAG" "$WORK/bundle"
rm -rf "$WORK/bundle/rootfs"
mv "$WORK/rootfs" "$WORK/bundle/rootfs"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
umoci repack --history.created "$created" --history.created_by "deploy/image/build.sh" \
  --image "$WORK/oci:$TAG" "$WORK/bundle"
umoci config --created "$created" --history.created "$created" --history.created_by "deploy/image/build.sh" \
  --image "$WORK/oci:$TAG" --config.user 65532:65532 \
  --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.cmd trainjob-dispatcher --config.cmd --help \
  --config.label org.opencontainers.image.title=$NAME \
  --config.label org.opencontainers.image.version="$TAG"
umoci gc --layout "$WORK/oci"
# The image's full name for importers (containerd, as `kind load image-archive` uses it;
# podman reads the same annotation).
python3 - "$WORK/oci/index.json" "$IMAGE" <<'PY'
import json, sys
path, name = sys.argv[1:]
index = json.load(open(path))
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {})["io.containerd.image.name"] = name
json.dump(index, open(path, "w"))
PY
tar -C "$WORK/oci" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -cf "$OUT" .
took=$(( $(date +%s) - start ))
size=$(du -m "$OUT" | cut -f1)
digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$WORK/oci/index.json")
say "built $OUT ($IMAGE, ${size} MiB archive, ${took}s, manifest $digest)"
