#!/usr/bin/env bash
# The install runbook (docs/operators/install.md) on three kind clusters: manager, worker1, worker2.
# Needs Docker or podman (KIND_EXPERIMENTAL_PROVIDER=podman), kind >= v0.33.0, kubectl, and this
# repository's venv (./run demo or ./run test makes it), plus the product's image archive
# (`./run image`). Kubeconfigs go to .bed-kind/ (git-ignored); `clusters/kind/down.sh` deletes
# the clusters. `./run kind` runs it offline with podman (docs/contributors/bed.md, "kind").
#   IMAGE=<registry>/<repository>:<tag>  the image the archive holds (default: the chart's)
#   IMAGE_ARCHIVE=<path>                 default dist/trainjob-multicluster.oci.tar
#   NODE_IMAGE=<image>                   kind's node image (default: kind's v1.36, by digest)
#   KIND_CONFIG=<path>                   the clusters' kind configuration (default: cluster.yaml)
#   KUEUE_MANIFESTS=<url or path>        Kueue's release manifests (default: v0.19.2's URL)
#   EXTRA_IMAGE_ARCHIVES="<path> ..."    more image archives loaded into every cluster
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$REPO/.bed-kind}
VENV=$REPO/.venv/bin
# kind v0.33.0's Kubernetes v1.36 node image, pinned by digest as kind's release notes ask.
NODE_IMAGE=${NODE_IMAGE:-kindest/node:v1.36.4@sha256:099e049362a1526b2db71494e1947aae99bd16290d7c895f2b7ea312e3cbfaed}
KIND_CONFIG=${KIND_CONFIG:-$HERE/cluster.yaml}
KUEUE_MANIFESTS=${KUEUE_MANIFESTS:-https://github.com/kubernetes-sigs/kueue/releases/download/v0.19.2/manifests.yaml}
IMAGE_ARCHIVE=${IMAGE_ARCHIVE:-$REPO/dist/trainjob-multicluster.oci.tar}
read -r -a EXTRA_IMAGE_ARCHIVES <<<"${EXTRA_IMAGE_ARCHIVES:-}"
WORKERS=(worker1 worker2)

fail() { echo "error: $*" >&2; exit 1; }
say() { printf '[kind %s] %s\n' "$(date +%T)" "$*" >&2; }

# ---- prerequisites ---------------------------------------------------------------------
engine=${KIND_EXPERIMENTAL_PROVIDER:-docker}  # kind's own switch
[[ $engine == docker || $engine == podman ]] || fail "KIND_EXPERIMENTAL_PROVIDER=$engine: docker or podman"
command -v "$engine" >/dev/null || fail "$engine is not installed (kind runs its nodes as containers)"
"$engine" info >/dev/null 2>&1 || fail "$engine does not answer (is it running, may you use it?)"
command -v kind >/dev/null || fail "kind is not installed: https://kind.sigs.k8s.io (v0.33.0 or later)"
kind_version=$(kind version | sed -E 's/^kind v([0-9]+)\.([0-9]+).*/\1 \2/')
read -r kind_major kind_minor <<<"$kind_version"
(( kind_major > 0 || kind_minor >= 33 )) || fail "kind $(kind version) is older than v0.33.0 (its node image is pinned)"
command -v kubectl >/dev/null || fail "kubectl is not installed"
[[ -x $VENV/trainjob-worker-secret ]] || fail "no venv at $REPO/.venv: run ./run test or ./run demo once"
IMAGE=${IMAGE:-$(cd "$REPO" && "$VENV/python" -m clusters.chart --image)}
DEFAULT_IMAGE=$(cd "$REPO" && "$VENV/python" -m clusters.chart --image)
[[ -f $IMAGE_ARCHIVE ]] || fail "no image archive at $IMAGE_ARCHIVE: build it with IMAGE=$IMAGE ./run image"
for archive in "${EXTRA_IMAGE_ARCHIVES[@]}"; do [[ -f $archive ]] || fail "no image archive at $archive"; done
mkdir -p "$OUT"
export PATH=$VENV:$PATH

# ---- clusters, Kueue, the product (runbook steps 1-2) ---------------------------------------
cluster() {  # name role
  local c=$1 role=$2 k=(kubectl --kubeconfig "$OUT/$1")
  say "$c: cluster, image, Kueue v0.19.2"
  kind get clusters | grep -qx "$c" || kind create cluster --name "$c" --image "$NODE_IMAGE" --config "$KIND_CONFIG"
  kind get kubeconfig --name "$c" > "$OUT/$c"
  for archive in "$IMAGE_ARCHIVE" "${EXTRA_IMAGE_ARCHIVES[@]}"; do
    kind load image-archive "$archive" --name "$c"
  done
  "${k[@]}" apply --server-side -f "$KUEUE_MANIFESTS"
  "${k[@]}" -n kueue-system rollout status deploy/kueue-controller-manager --timeout=5m
  "${k[@]}" -n kueue-system get configmap kueue-manager-config -o yaml \
    | trainjob-kueue-config --role "$role" | "${k[@]}" apply -f -
  "${k[@]}" -n kueue-system rollout restart deploy/kueue-controller-manager
  "${k[@]}" -n kueue-system rollout status deploy/kueue-controller-manager --timeout=5m
  say "$c: the product (deploy/$role, image $IMAGE)"
  "${k[@]}" kustomize "$REPO/deploy/$role" | sed "s#image: $DEFAULT_IMAGE\$#image: $IMAGE#" > "$OUT/$c-$role.yaml"
  # Kueue's webhooks see the Deployments: right after its restart, the Service may still
  # lead to the pod that went (until kube-proxy follows), and the write is refused.
  for attempt in 1 2 3 4 5 6; do
    "${k[@]}" apply --server-side -f "$OUT/$c-$role.yaml" && break
    (( attempt < 6 )) || fail "$c: deploy/$role refused 6 times"
    say "$c: refused (Kueue's webhook not reached yet?); again in 5 s"
    sleep 5
  done
  "${k[@]}" -n trainjob-system rollout status deploy --timeout=5m
}

for w in "${WORKERS[@]}"; do
  cluster "$w" worker
  sed "s#image: $DEFAULT_IMAGE\$#image: $IMAGE#" "$REPO/examples/install/runtime.yaml" \
    | kubectl --kubeconfig "$OUT/$w" apply -f - -f "$REPO/examples/install/worker-queues.yaml"
done
cluster manager manager

# ---- the manager's queues, then each worker joined (runbook steps 4-5) ----------------------
sed "s#image: $DEFAULT_IMAGE\$#image: $IMAGE#" "$REPO/examples/install/runtime.yaml" \
  | kubectl --kubeconfig "$OUT/manager" apply -f - -f "$REPO/examples/install/manager-queues.yaml"
for w in "${WORKERS[@]}"; do
  # --internal: the address the manager's pods reach the worker's API server on.
  server=$(kind get kubeconfig --internal --name "$w" | kubectl --kubeconfig /dev/stdin config view --minify -o jsonpath='{.clusters[0].cluster.server}')
  trainjob-fleet --kubeconfig "$OUT/manager" join --name "$w" --server "$server" \
    --worker-kubeconfig "$OUT/$w"
done
kubectl --kubeconfig "$OUT/manager" wait --for=condition=Active --timeout=2m admissioncheck/multikueue
say "ready; try: kubectl --kubeconfig $OUT/manager apply -f examples/install/trainjob.yaml"
echo "kubeconfigs in $OUT: manager ${WORKERS[*]}"
