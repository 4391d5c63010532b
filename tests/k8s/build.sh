#!/usr/bin/env bash
# Builds the real Kubernetes components the tests run, from the Go module k8s.io/kubernetes
# pinned in go.mod, into target/k8s/bin. A stamp of the inputs makes a second run rebuild
# nothing; Go's own caches make a changed pin rebuild only what changed.
set -euo pipefail
cd "$(dirname "$0")"
out=../../target/k8s/bin
version=$(sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p' go.mod)
stamp=$(cat go.mod go.sum build.sh | sha256sum | cut -c1-32)
if [ -x "$out/kube-apiserver" ] && [ -x "$out/kubelet" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "tests/k8s: kube-apiserver and kubelet $version are built (target/k8s/bin)"
  exit 0
fi
minor=$(echo "$version" | cut -d. -f2)
pkg=k8s.io/component-base/version
echo "tests/k8s: building kube-apiserver and kubelet $version from the Go module (a few minutes, once)"
mkdir -p "$out"
go build -trimpath \
  -ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
  -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubelet
echo "$stamp" > "$out/.stamp"
