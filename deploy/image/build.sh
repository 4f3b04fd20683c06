#!/usr/bin/env bash
# Build the product's image from the repository's Dockerfile with buildah, without a registry:
# - the base: BASE if given (any Debian 12 image buildah can read, e.g. docker.io/... or
#   oci-archive:/path), else a Debian 12 (bookworm) root filesystem made here by mmdebstrap
#   from Debian's mirror (DEBIAN_MIRROR=https://snapshot.debian.org/archive/debian/<date>/
#   pins its packages to a day) and packed by umoci;
# - the Dockerfile then adds Debian's python3, libcurl from bookworm-backports (the same mirror),
#   the wheels of deploy/image/requirements.lock, each checked against its sha256, pycurl
#   compiled from its checked source, and the project's own wheel;
# - every file's time and the image's creation time are SOURCE_DATE_EPOCH (default: the commit
#   time of HEAD), so that the same inputs give the same image digest.
# The image is written as an OCI archive, dist/trainjob-multicluster.oci.tar, and the packages
# it holds are listed in dist/image-packages.txt and dist/image-requirements.txt.
# Needs root, buildah, and (without BASE) mmdebstrap and umoci; the network to Debian's mirror
# and PyPI.
#   Usage: [IMAGE=<registry>/<repository>:<tag>] [BASE=<image>] [ARCH=amd64|arm64] deploy/image/build.sh
# ARCH other than this host's builds through qemu-user (binfmt_misc, Debian's
# qemu-user-static): every command of the Dockerfile then runs emulated.
# IMAGE defaults to the chart's image (charts/trainjob-multicluster/values.yaml, the chart's
# appVersion as the tag): the one place that names it.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
NAME=trainjob-multicluster
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
IMAGE=${IMAGE:-$(cd "$REPO" && "$PYTHON" -m clusters.chart --image)}
TAG=${IMAGE##*:}
ARCH=${ARCH:-$(dpkg --print-architecture)}
if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
  SOURCE_DATE_EPOCH=$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || stat -c %Y "$REPO/pyproject.toml")
fi
export SOURCE_DATE_EPOCH
[[ $IMAGE == */* && $TAG != "$IMAGE" && $TAG != */* ]] \
  || { echo "error: IMAGE=$IMAGE is not <registry>/<repository>:<tag>" >&2; exit 2; }
DIST=$REPO/dist
OUT=${OUT:-$DIST/$NAME.oci.tar}  # the archive; the bed builds into its cache this way
# Lower case only: buildah names an image pulled from an OCI layout after its path.
WORK=/tmp/trainjob-image.$$.$RANDOM
mkdir -m 700 "$WORK"
# buildah keeps its images in a store of this build's own, removed with it.
STORE=(--root "$WORK/store" --runroot "$WORK/run" --storage-driver vfs)
trap 'buildah "${STORE[@]}" rm --all >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
say() { printf '[image %s] %s\n' "$(date +%T)" "$*" >&2; }
needs=(buildah)
[[ -n ${BASE:-} ]] || needs+=(mmdebstrap umoci)
for tool in "${needs[@]}"; do
  command -v "$tool" >/dev/null || { echo "error: $tool is not installed (apt-get install $tool)" >&2; exit 1; }
done
[[ $(id -u) == 0 ]] || { echo "error: run as root (buildah's chroot isolation)" >&2; exit 1; }
mkdir -p "$DIST"
start=$(date +%s)

if [[ -z ${BASE:-} ]]; then
  say "base: Debian 12 minbase from $MIRROR (mmdebstrap, umoci)"
  # As Docker Hub's debian:bookworm-slim: no documentation, manual pages or locales.
  mmdebstrap --quiet --variant=minbase --architectures="$ARCH" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/log/* "$1"/var/cache/ldconfig/aux-cache "$1"/var/lib/apt/lists/*' \
    bookworm "$WORK/rootfs" "$MIRROR"
  find "$WORK/rootfs" -depth -newermt "@$SOURCE_DATE_EPOCH" -exec touch --no-dereference --date="@$SOURCE_DATE_EPOCH" {} +
  created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  umoci init --layout "$WORK/base"
  umoci new --image "$WORK/base:bookworm"
  umoci unpack --image "$WORK/base:bookworm" "$WORK/bundle"
  rm -rf "$WORK/bundle/rootfs" && mv "$WORK/rootfs" "$WORK/bundle/rootfs"
  umoci repack --history.created "$created" --history.created_by "mmdebstrap --variant=minbase bookworm" \
    --image "$WORK/base:bookworm" "$WORK/bundle"
  umoci config --architecture "$ARCH" --created "$created" --history.created "$created" --history.created_by "deploy/image/build.sh" \
    --image "$WORK/base:bookworm" --config.env PATH=/usr/local/bin:/usr/bin:/bin --config.cmd bash
  umoci gc --layout "$WORK/base"
  rm -rf "$WORK/bundle"
  BASE=oci:$WORK/base:bookworm
  MADE_BASE=1
fi

say "image $IMAGE from the Dockerfile (buildah, base $BASE)"
buildah "${STORE[@]}" pull --quiet --arch "$ARCH" "$BASE" >/dev/null
base_id=$(buildah "${STORE[@]}" images --quiet --noheading | head -1)
# A CA bundle this host's pip trusts (a TLS-inspecting proxy's) is lent to the build stage.
ca=()
host_ca=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [[ -n $host_ca && -f $host_ca ]]; then
  ca=(--secret "id=pip-ca,src=$host_ca")
fi
# No build history (it would name this build's temporary paths) and no builder label: the
# same inputs give the same digest, whatever the machine.
buildah "${STORE[@]}" build --quiet --platform "linux/$ARCH" --isolation chroot --network host --no-hosts --layers=false "${ca[@]}" \
  --omit-history --identity-label=false \
  --timestamp "$SOURCE_DATE_EPOCH" --build-arg SOURCE_DATE_EPOCH="$SOURCE_DATE_EPOCH" \
  --build-arg BASE="$base_id" --build-arg VERSION="$TAG" --build-arg DEBIAN_MIRROR="$MIRROR" \
  --file "$REPO/Dockerfile" --tag "$IMAGE" "$REPO" >&2
# What the image holds, listed from the image itself.
listing=$(buildah "${STORE[@]}" from --quiet --arch "$ARCH" "$IMAGE")
rootfs=$(buildah "${STORE[@]}" mount "$listing")
chroot "$rootfs" dpkg-query -W -f '${Package}=${Version}\n' | sort > "$DIST/image-packages.txt"
(cd "$rootfs"/usr/local/lib/python3*/dist-packages && ls -d *.dist-info) \
  | sed -E 's/^(.+)-([^-]+)\.dist-info$/\1==\2/' | sort > "$DIST/image-requirements.txt"
buildah "${STORE[@]}" umount "$listing" >/dev/null
rm -f "$OUT"
# The archive names the image (the io.containerd.image.name annotation `ctr images import`
# and `kind load image-archive` read; podman reads the same annotation).
buildah "${STORE[@]}" push --quiet "$IMAGE" "oci:$WORK/oci:$IMAGE" >&2
# A base made here is named after this build's temporary path: its annotations go, so that
# the same inputs give the same digest.
python3 - "$WORK/oci" "$IMAGE" "${MADE_BASE:-}" <<'PY'
import hashlib, json, os, sys
layout, name, made_base = sys.argv[1:]
index_path = os.path.join(layout, "index.json")
index = json.load(open(index_path))
for entry in index["manifests"]:
    if made_base:
        blob = os.path.join(layout, "blobs", *entry["digest"].split(":"))
        manifest = json.load(open(blob))
        notes = {k: v for k, v in manifest.get("annotations", {}).items()
                 if not k.startswith("org.opencontainers.image.base.")}
        manifest["annotations"] = notes
        if not notes:
            del manifest["annotations"]
        body = json.dumps(manifest, separators=(",", ":")).encode()
        digest = hashlib.sha256(body).hexdigest()
        os.remove(blob)
        with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as out:
            out.write(body)
        entry["digest"], entry["size"] = f"sha256:{digest}", len(body)
    entry.setdefault("annotations", {})["io.containerd.image.name"] = name
json.dump(index, open(index_path, "w"))
PY
tar -C "$WORK/oci" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner -cf "$OUT" .
took=$(( $(date +%s) - start ))
size=$(du -m "$OUT" | cut -f1)
digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$WORK/oci/index.json")
say "built $OUT ($IMAGE, ${size} MiB archive, ${took}s, manifest $digest)"
