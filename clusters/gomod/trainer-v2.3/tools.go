//go:build tools

// Package tools pins the Trainer controller manager command a `trainer` cluster of the bed runs.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
