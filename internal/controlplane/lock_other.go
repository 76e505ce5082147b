//go:build !unix

package controlplane

// lockState is a no-op where flock is not available: run one writer.
func lockState(string) (func(), error) { return func() {}, nil }
