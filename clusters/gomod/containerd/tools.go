//go:build tools

// Package tools pins the container runtime of the bed's real nodes: containerd, its runc shim
// and ctr (to import the offline-built images).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
