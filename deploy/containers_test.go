package deploy

import (
	"io/fs"
	"strings"
	"testing"
)

// TestEveryContainerIsHardened: every container and init container of
// every workload among the manifests — the gateways', the control
// plane's, and any added later — runs as non-root with a read-only root
// filesystem, no privilege escalation and no capability.
func TestEveryContainerIsHardened(t *testing.T) {
	m, err := loadManifests(filesIn(t, "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.podTemplates()) == 0 {
		t.Fatal("no workload among the manifests")
	}
	for _, p := range m.everyContainerProblems() {
		t.Error(p)
	}
}

// containerProblems is everyContainerProblems of the manifests of fsys.
func containerProblems(fsys fs.FS) string {
	m, err := loadManifests(fsys)
	if err != nil {
		return err.Error()
	}
	return strings.Join(m.everyContainerProblems(), "\n")
}

func TestEveryContainerChecksCatchMistakes(t *testing.T) {
	const containers = "      containers:\n        - name: corput\n"
	mutations{
		{"an init container without a securityContext", "statefulset.yaml", containers,
			"      initContainers:\n        - name: setup\n          image: busybox\n" + containers,
			"StatefulSet corput, container setup: container has no securityContext"},
		{"a sidecar with a writable root", "statefulset.yaml", containers,
			"      containers:\n        - name: proxy\n          image: envoy\n          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: false, capabilities: {drop: [ALL]}}\n        - name: corput\n",
			"StatefulSet corput, container proxy: readOnlyRootFilesystem must be true"},
		{"the gateway as root", "statefulset.yaml", "        runAsUser: 65532\n", "        runAsUser: 0\n",
			"StatefulSet corput, container corput: runAsUser 0 is root"},
		{"the gateway allowed root", "statefulset.yaml", "        runAsNonRoot: true\n", "        runAsNonRoot: false\n",
			"StatefulSet corput, container corput: runAsNonRoot must be true"},
	}.run(t, "kubernetes", containerProblems)
}
