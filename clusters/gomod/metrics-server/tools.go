//go:build tools

// Package tools pins the metrics-server command the real-node bed's workers run.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
