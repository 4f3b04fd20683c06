//go:build tools

// Wrapper module for controller-gen, which writes Volcano's PodGroup CRD from the API types
// Kubeflow Trainer v2.3 builds against (volcano.sh/apis), as Volcano's own build does; the bed
// installs it on a worker to test gang scheduling (clusters/podgroups.py).
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)
