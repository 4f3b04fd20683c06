#!/usr/bin/env bash
# Same topology as the local bed, on kind (needs Docker; cannot run on machines without it).
# Creates manager, worker1, worker2; installs Kueue configured for this product
# (deploy/kueue/<role>) and the product from deploy/<role>, with the image loaded from an OCI
# archive (IMAGE_ARCHIVE, default dist/trainjob-multicluster.oci.tar); writes each worker's
# kubeconfig Secret on the manager with trainjob-worker-secret; kubeconfigs go to .bed-kind/.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OUT=${OUT:-$REPO/.bed-kind}
IMAGE=${IMAGE:-trainjob-multicluster:0.1.0}
IMAGE_ARCHIVE=${IMAGE_ARCHIVE:-$REPO/dist/trainjob-multicluster.oci.tar}
WORKERS=(worker1 worker2)
mkdir -p "$OUT"
[[ -f $IMAGE_ARCHIVE ]] || { echo "no image archive at $IMAGE_ARCHIVE (build it first)" >&2; exit 1; }

install() {  # cluster role
  local c=$1 role=$2
  kind get clusters | grep -qx "$c" || kind create cluster --name "$c" --config "$HERE/cluster.yaml"
  kind get kubeconfig --name "$c" > "$OUT/$c"
  kind load image-archive "$IMAGE_ARCHIVE" --name "$c"
  kubectl --kubeconfig "$OUT/$c" apply --server-side -k "$REPO/deploy/kueue/$role"
  kubectl --kubeconfig "$OUT/$c" -n kueue-system rollout status deploy/kueue-controller-manager --timeout=5m
  kubectl --kubeconfig "$OUT/$c" kustomize "$REPO/deploy/$role" \
    | sed "s#image: trainjob-multicluster:0.1.0#image: $IMAGE#" \
    | kubectl --kubeconfig "$OUT/$c" apply --server-side -f -
  kubectl --kubeconfig "$OUT/$c" -n trainjob-system rollout status deploy --timeout=5m
}

for w in "${WORKERS[@]}"; do install "$w" worker; done
install manager manager
for w in "${WORKERS[@]}"; do
  # --internal: the address the manager's pods reach the worker's API server on.
  kind get kubeconfig --internal --name "$w" > "$OUT/$w.internal"
  trainjob-worker-secret --worker-kubeconfig "$OUT/$w" --name "$w" \
      --server "$(kubectl --kubeconfig "$OUT/$w.internal" config view --minify -o jsonpath='{.clusters[0].cluster.server}')" \
    | kubectl --kubeconfig "$OUT/manager" apply -f -
done
echo "kubeconfigs in $OUT: manager ${WORKERS[*]}"
