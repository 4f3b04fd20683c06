//go:build tools

// Package tools pins the Trainer controller manager command this bed builds.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
