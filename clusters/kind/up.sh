#!/usr/bin/env bash
# Same topology as the local bed, on kind (needs Docker; cannot run on machines without it).
# Creates manager, worker1, worker2; installs Kueue from its release manifests configured like
# the bed (TrainJob as an external framework; MultiKueue gate off on the manager); writes one
# kubeconfig Secret per worker on the manager; writes kubeconfigs to .bed-kind/<name>.
set -euo pipefail
KUEUE_VERSION=${KUEUE_VERSION:-v0.19.2}
CLUSTERS=(manager worker1 worker2)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/../../.bed-kind}
mkdir -p "$OUT"
for c in "${CLUSTERS[@]}"; do
  kind get clusters | grep -qx "$c" || kind create cluster --name "$c" --config "$HERE/cluster.yaml"
  kind get kubeconfig --name "$c" > "$OUT/$c"
  kubectl --kubeconfig "$OUT/$c" apply --server-side -f "$HERE/../../crds/" 2>/dev/null || true
  kubectl --kubeconfig "$OUT/$c" apply --server-side \
    -f "https://github.com/kubernetes-sigs/kueue/releases/download/${KUEUE_VERSION}/manifests.yaml"
  gates="VisibilityOnDemand=false"
  [[ $c == manager ]] && gates="MultiKueue=false,$gates"
  kubectl --kubeconfig "$OUT/$c" -n kueue-system get cm kueue-manager-config -o json \
    | python3 "$HERE/configure_kueue.py" "$gates" \
    | kubectl --kubeconfig "$OUT/$c" apply -f -
  kubectl --kubeconfig "$OUT/$c" -n kueue-system rollout restart deploy/kueue-controller-manager
done
for w in worker1 worker2; do
  # --internal: the address the manager's pods reach the worker's API server on.
  kind get kubeconfig --internal --name "$w" > "$OUT/$w.internal"
  kubectl --kubeconfig "$OUT/manager" -n kueue-system create secret generic "$w-secret" \
    --from-file=kubeconfig="$OUT/$w.internal" --dry-run=client -o yaml \
    | kubectl --kubeconfig "$OUT/manager" apply -f -
done
echo "kubeconfigs in $OUT: ${CLUSTERS[*]}"
