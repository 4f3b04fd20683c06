//go:build tools

// Package tools pins the Kueue manager command this bed builds.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
