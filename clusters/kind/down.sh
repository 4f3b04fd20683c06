#!/usr/bin/env bash
# Delete the kind clusters up.sh created, and their kubeconfigs.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
command -v kind >/dev/null || { echo "error: kind is not installed" >&2; exit 1; }
for c in manager worker1 worker2; do kind delete cluster --name "$c"; done
rm -rf "${OUT:-$REPO/.bed-kind}"
