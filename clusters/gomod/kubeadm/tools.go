//go:build tools

// Package tools pins kubeadm, for the node image of the kind path (clusters/kindnode.py): a
// module of its own, so that the bed's other Kubernetes builds keep their keys.
package tools

import _ "k8s.io/kubernetes/cmd/kubeadm"
