//go:build tools

// Package tools pins the JobSet controller manager command this bed builds.
package tools

import _ "sigs.k8s.io/jobset"
