// The client-go probe: a Go program, outside the Cargo workspace, that drives the simulated
// API server with client-go. Built by build.sh (see there for building without a module proxy).
module informer-rs/client-go-probe

go 1.25

require (
	k8s.io/api v0.36.3
	k8s.io/apimachinery v0.36.3
	k8s.io/client-go v0.36.3
)
