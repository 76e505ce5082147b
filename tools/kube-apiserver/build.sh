#!/bin/sh
# Builds kube-apiserver v1.37.2 from the Go module proxy into a cache folder outside the
# repository, for the tests that run against a real Kubernetes API server (internal/kubetest).
# A binary already there is kept: the cold build takes about 8 minutes on 2 cores and 2.5 GB of
# memory; a warm Go build cache makes it seconds. Prints the binary's path.
#
#   tools/kube-apiserver/build.sh            # build (or keep) and print the path
#   CORPUT_KUBE_APISERVER=/path build.sh     # build to that path instead
set -eu

version=v1.37.2
here=$(cd "$(dirname "$0")" && pwd)
out=${CORPUT_KUBE_APISERVER:-${XDG_CACHE_HOME:-$HOME/.cache}/corput/kube-apiserver-$version/kube-apiserver}

if [ -x "$out" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$(dirname "$out")"
echo "building kube-apiserver $version into $out (about 8 minutes on 2 cores)" >&2
cd "$here"
CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
	-o "$out.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$out.tmp" "$out"
echo "$out"
