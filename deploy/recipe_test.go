package deploy

import (
	"testing"
)

// deploymentRecipe turns deploy/kubernetes's StatefulSet into a
// Deployment whose positions the control plane assigns (fleet.server):
// the edits docs/deployment.md lists under "A Deployment instead of a
// StatefulSet", applied to the files as they are.
var deploymentRecipe = []mutation{
	{name: "a Deployment", file: "statefulset.yaml", old: "kind: StatefulSet", new: "kind: Deployment"},
	{name: "no governing Service", file: "statefulset.yaml", old: "  serviceName: corput-peers\n", new: ""},
	{name: "a Deployment's rollout", file: "statefulset.yaml",
		old: "  # Gateways do not depend on each other: start and replace them in\n  # parallel. Rolling updates still go one pod at a time.\n  podManagementPolicy: Parallel\n  updateStrategy:\n    type: RollingUpdate\n",
		new: "  # One new pod at a time, ready before an old one goes: it registers\n  # with the control plane, which holds the old pod's position for its\n  # grace and then moves the newest gateway into it.\n  strategy:\n    type: RollingUpdate\n    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}\n"},
	{name: "no ordinal", file: "statefulset.yaml",
		old: "            # This gateway's position in the fleet: the pod ordinal, which\n            # the StatefulSet controller puts in this label (Kubernetes ≥ 1.28).\n            - name: CORPUT_FLEET_INSTANCE\n              valueFrom:\n                fieldRef:\n                  fieldPath: metadata.labels['apps.kubernetes.io/pod-index']\n",
		new: "            # No CORPUT_FLEET_*: the control plane assigns the position.\n"},
	{name: "positions from the control plane", file: "configmap.yaml",
		old: "fleet: {size: 3}             # = the StatefulSet's replicas; the instance is the pod ordinal (env)",
		new: "fleet: {server: corput-control-plane:18001}   # the position, by pod name, from the control plane's leader"},
}

// TestDeploymentRecipe: the recipe gives manifests that pass every check,
// with one gateway Deployment and no StatefulSet.
func TestDeploymentRecipe(t *testing.T) {
	m, err := loadManifests(mutated(t, "kubernetes", deploymentRecipe...))
	if err != nil {
		t.Fatal(err)
	}
	if n, d := len(m.statefulSets), len(m.deploymentsOf(gatewayComponent)); n != 0 || d != 1 {
		t.Fatalf("the recipe gives %d StatefulSets and %d gateway Deployments, want 0 and 1", n, d)
	}
	for _, p := range m.problems() {
		t.Error(p)
	}
}

// TestDeploymentRecipeChecksCatchMistakes: on top of the recipe, each
// mistake is reported.
func TestDeploymentRecipeChecksCatchMistakes(t *testing.T) {
	mutations{
		{"a fleet variable kept", "statefulset.yaml", "          env:\n", "          env:\n            - {name: CORPUT_FLEET_SIZE, value: \"3\"}\n", "CORPUT_FLEET_SIZE is set: with fleet.server the gateway refuses to start"},
		{"positions asked elsewhere", "configmap.yaml", "fleet: {server: corput-control-plane:18001}", "fleet: {server: other:18001}", `fleet.server "other:18001" is not the control plane's fleet port corput-control-plane:18001`},
		{"positions asked on the EDS port", "configmap.yaml", "fleet: {server: corput-control-plane:18001}", "fleet: {server: corput-control-plane:18000}", `fleet.server "corput-control-plane:18000" is not the control plane's fleet port corput-control-plane:18001`},
		{"one node id for every pod", "configmap.yaml", "fleet: {server: corput-control-plane:18001}", "fleet: {server: corput-control-plane:18001, node_id: gw}", "is the same for every pod"},
		{"no control plane to place it", "configmap.yaml", "fleet: {server: corput-control-plane:18001}", "fleet: {size: 3}", "its pods have no dense ordinals; set fleet.server"},
		{"a size beside the control plane", "configmap.yaml", "fleet: {server: corput-control-plane:18001}", "fleet: {server: corput-control-plane:18001, size: 3}", "fleet.size: the control plane at fleet.server assigns"},
	}.run(t, "kubernetes", manifestProblems, deploymentRecipe...)
}
