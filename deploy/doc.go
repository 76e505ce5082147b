// Package deploy holds the files that run a corput fleet and watch it
// (docs/deployment.md): Kubernetes manifests in kubernetes/ (a StatefulSet, so every
// gateway's fleet position is its pod ordinal; its ConfigMap, admin-token
// Secret, Services, PodDisruptionBudget, PodMonitor, NetworkPolicy and
// kustomization; and corput control-plane as a one-writer Deployment with
// its state on a PersistentVolumeClaim, its origins ConfigMap and its
// Service) and the Grafana
// dashboard grafana/corput.json on the metrics of docs/contract.md.
//
// The package has no code of its own beyond embedding the files. Its
// tests are the point: they keep the files honest without anyone reading
// them by eye.
//
//   - Every manifest decodes strictly (unknown, misspelt or duplicate fields
//     fail) into the k8s.io/api types, or, for the Prometheus Operator and
//     kustomize kinds whose Go types are not among our modules, into small
//     local mirrors of the fields used.
//   - The manifests agree with each other and with corput: selectors match
//     the pod labels, probes reach /readyz and /healthz on the admin port
//     the embedded config really listens on, the admin port is published by
//     no Service that leaves the cluster, the ConfigMap's fleet.size equals
//     the replica count (and no CORPUT_FLEET_SIZE overrides it), and the
//     grace period outlasts the preStop sleep plus the config's drain
//     timeout. The embedded config passes config.Parse
//     without a warning but plaintext xDS to the control plane (the
//     manifests ship no certificates; docs/deployment.md, "Securing
//     xDS"), over the files its volume mounts (so the admin
//     token file is set and comes from the Secret). The NetworkPolicy keeps
//     the http port open and admits only label-selected peers (Prometheus)
//     to the admin port.
//   - The control plane is one writer (replicas 1, strategy Recreate)
//     running flags `corput control-plane` has, its --state on a writable
//     PersistentVolumeClaim among the manifests (fsGroup set), its --source
//     a ConfigMap file the control plane accepts, its listeners the pod's
//     xds and admin ports on the pod address, probed on /readyz and
//     /healthz, published by one ClusterIP Service (xds only), selected by
//     nothing of the gateways'; and every gateway xDS origin names that
//     Service, a cluster of the source file and the same subset sizing.
//   - Every container and init container of every workload runs as
//     non-root with a read-only root filesystem, no privilege escalation
//     and every capability dropped.
//   - The repository's Dockerfile builds a static binary
//     (CGO_ENABLED=0 go build -trimpath -ldflags '-s -w') in a golang
//     stage no older than go.mod's go line, and runs it from distroless
//     static nonroot as a numeric non-root USER that the manifests'
//     runAsUser agrees with, its ENTRYPOINT the binary and its CMD flags
//     the binary has; .dockerignore leaves out no tracked file. With
//     CORPUT_STATIC_BUILD=1 (.ci/run) the build command runs and its
//     binary must be static.
//   - Every PromQL expression of the dashboard names a metric the registry
//     of telemetry.New exports, with labels (in selectors and in by/on
//     clauses) and label values that metric really has; rate() is only
//     taken of counters and histogram_quantile only of buckets grouped by
//     le; and every corput_* metric has a panel.
package deploy

import "embed"

// Files holds kubernetes/*.yaml, grafana/corput.json and systemd/*, as validated by
// this package's tests.
//
//go:embed kubernetes grafana systemd
var Files embed.FS
