#!/usr/bin/env bash
# Delete the kind clusters up.sh created.
set -euo pipefail
for c in manager worker1 worker2; do kind delete cluster --name "$c"; done
