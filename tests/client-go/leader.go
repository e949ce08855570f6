package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcoordination "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderMode runs one client-go leader elector on the Lease PROBE_LEASE in PROBE_NAMESPACE as
// PROBE_IDENTITY (15 s lease, 10 s renew deadline, 250 ms retry period, released on cancel),
// until its standard input closes. It prints, one per line: "leader <identity>" for each leader
// it observes, "leading" when it starts leading, "stopped" when it stops, and "released" once
// the elector has returned (after its release, if it led).
func leaderMode(cfg *rest.Config) {
	ns, name, id := os.Getenv("PROBE_NAMESPACE"), os.Getenv("PROBE_LEASE"), os.Getenv("PROBE_IDENTITY")
	if ns == "" || name == "" || id == "" {
		fmt.Fprintln(os.Stderr, "client-go-probe: leader mode needs PROBE_NAMESPACE, PROBE_LEASE and PROBE_IDENTITY")
		os.Exit(2)
	}
	coord, err := typedcoordination.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-probe: coordination client: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// The test ends the election by closing our standard input.
		r := bufio.NewReader(os.Stdin)
		for {
			if _, err := r.ReadByte(); err != nil {
				cancel()
				return
			}
		}
	}()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
		Client:     coord,
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Name:            "client-go-probe",
		Lock:            lock,
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     250 * time.Millisecond,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { fmt.Println("leading") },
			OnStoppedLeading: func() { fmt.Println("stopped") },
			OnNewLeader:      func(identity string) { fmt.Println("leader " + identity) },
		},
	})
	fmt.Println("released")
}
