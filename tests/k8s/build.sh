#!/usr/bin/env bash
# Builds the real Kubernetes components the tests run, from the Go module k8s.io/kubernetes
# pinned in go.mod, and the upstream KubeSlice worker-operator, from the Go module pinned in
# worker/go.mod, into target/k8s/bin. A stamp of each one's inputs makes a second run rebuild
# nothing; Go's own caches make a changed pin rebuild only what changed.
set -euo pipefail
cd "$(dirname "$0")"
out=../../target/k8s/bin
mkdir -p "$out"

version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' go.mod)
stamp=$(cat go.mod go.sum | sha256sum | cut -c1-32)
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kubelet" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "tests/k8s: kube-apiserver and kubelet $version are built (target/k8s/bin)"
else
  minor=$(echo "$version" | cut -d. -f2)
  pkg=k8s.io/component-base/version
  echo "tests/k8s: building kube-apiserver and kubelet $version from the Go module (a few minutes, once)"
  go build -trimpath \
    -ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
    -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet
  echo "$stamp" > "$out/.stamp"
fi

# The worker-operator's root package is its manager. Static (CGO_ENABLED=0), so the image
# needs nothing else; built with the versions its own go.mod names.
worker_version=$(sed -n 's/^require github.com\/kubeslice\/worker-operator \(v[0-9.]*\)$/\1/p' worker/go.mod)
worker_stamp=$(cat worker/go.mod worker/go.sum | sha256sum | cut -c1-32)
if [ -x "$out/worker-operator" ] && [ "$(cat "$out/.stamp-worker" 2>/dev/null)" = "$worker_stamp" ]; then
  echo "tests/k8s: worker-operator $worker_version is built (target/k8s/bin)"
else
  echo "tests/k8s: building the KubeSlice worker-operator $worker_version from the Go module (about 5 minutes, once)"
  (cd worker && CGO_ENABLED=0 go build -trimpath -o "../$out/worker-operator" github.com/kubeslice/worker-operator)
  echo "$worker_stamp" > "$out/.stamp-worker"
fi

# The Helm CLI that runs the docs' commands (test_docs_routes.py), from the Go module pinned in
# helm/go.mod: its own module, as Helm's Kubernetes libraries are newer than ours.
helm_version=$(sed -n 's/^require helm.sh\/helm\/v4 \(v[0-9.]*\)$/\1/p' helm/go.mod)
helm_stamp=$(cat helm/go.mod helm/go.sum | sha256sum | cut -c1-32)
if [ -x "$out/helm" ] && [ "$(cat "$out/.stamp-helm" 2>/dev/null)" = "$helm_stamp" ]; then
  echo "tests/k8s: helm $helm_version is built (target/k8s/bin)"
else
  echo "tests/k8s: building helm $helm_version from the Go module (a few minutes, once)"
  (cd helm && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
    -o "../$out/helm" helm.sh/helm/v4/cmd/helm)
  echo "$helm_stamp" > "$out/.stamp-helm"
fi
