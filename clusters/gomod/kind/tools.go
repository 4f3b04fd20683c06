//go:build tools

// Package tools pins the kind command of the kind path (clusters/kind, `./run kind`).
package tools

import _ "sigs.k8s.io/kind"
