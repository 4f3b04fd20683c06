//go:build tools

// Package tools pins runc, the OCI runtime under containerd on the bed's real nodes (Debian 12's
// runc 1.1 cannot start the containers containerd 2 asks for).
package tools

import _ "github.com/opencontainers/runc"
