package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	typedcore "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The annotation a paced event carries its send time in (microseconds since the UNIX epoch).
const sentAnnotation = "informer-rs.bench/sent-us"

// peerMode is client-go's side of the peer comparison (benches/peer, clients go-pod and
// go-pod-json): a shared informer of every Pod, its handler counting updates, against the
// bench's fast server at SIM_URL. It prints "ready" once the cache has synced and the handler
// has had every initial add, waits for "go" on its standard input (the bench then releases the
// server's watch events), and prints "result {json}" once PEER_EVENTS updates were handled:
// events/s, CPU and context switches per event (every thread's, from /proc), memory, and for a
// paced watch the latency from the server's send to the handler.
//
// PEER_KIND=configmaps makes it an informer of ConfigMaps instead (the scale runs' small objects).
//
// PEER_DROP=client strips every pod's managedFields before it is cached, with a transform, as
// controller-runtime users do; PEER_DROP=server also asks the server to leave them out
// (drop=metadata.managedFields on each media range of Accept, KEP-5958).
func peerMode(cfg *rest.Config) {
	events := envInt("PEER_EVENTS", 100000)
	cached := envInt("PEER_CACHED", 10000)
	drop := os.Getenv("PEER_DROP")
	if os.Getenv("PEER_ENCODING") == "json" {
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	if drop == "server" {
		accept := cfg.AcceptContentTypes
		if accept == "" {
			accept = "application/vnd.kubernetes.protobuf,application/json"
		}
		ranges := strings.Split(accept, ",")
		for i, r := range ranges {
			ranges[i] = strings.TrimSpace(r) + ";drop=metadata.managedFields"
		}
		cfg.AcceptContentTypes = strings.Join(ranges, ",")
	}
	cfg.WrapTransport = nil
	// No client timeout, client-go's default: an http.Client's timeout bounds a whole request,
	// the reading of a watch's body included, so the probe's 30 s would cut the watch of a
	// large cache (its watch-list and the paced events after it on the same stream) and the
	// fake server, which sends its events on the first watch alone, would leave the re-watch
	// silent: a run that never ends.
	cfg.Timeout = 0
	cfg.QPS, cfg.Burst = 1000, 1000
	started := time.Now()
	core, err := typedcore.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-probe: %v\n", err)
		os.Exit(2)
	}
	resource := "pods"
	var example k8sruntime.Object = &corev1.Pod{}
	if os.Getenv("PEER_KIND") == "configmaps" {
		resource, example = "configmaps", &corev1.ConfigMap{}
	}
	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(core.RESTClient(), resource, "", fields.Everything()),
		example, 0, cache.Indexers{},
	)
	if drop == "client" || drop == "server" {
		err = informer.SetTransform(func(obj interface{}) (interface{}, error) {
			if o, ok := obj.(metav1.Object); ok {
				o.SetManagedFields(nil)
			}
			return obj, nil
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "client-go-probe: %v\n", err)
			os.Exit(2)
		}
	}
	var adds, updates atomic.Int64
	addsDone, updatesDone := make(chan struct{}), make(chan struct{})
	// The count of updates that ends the run, set at "go": against the fake server every update
	// counts (none comes before its release, which follows "go", though one may come before the
	// probe reads it); against a real server (whose writer runs all along) those before "go" are
	// the list's tail, left out, and so are their latencies.
	var target atomic.Int64
	target.Store(math.MaxInt64)
	// The fake server (plain HTTP, no SIM_CA) sends no update before its release, which follows
	// "go"; a real server's writer runs all along.
	fake := os.Getenv("SIM_CA") == ""
	var finish sync.Once
	var lat atomic.Pointer[latencies]
	lat.Store(&latencies{})
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) {
			if adds.Add(1) == int64(cached) {
				close(addsDone)
			}
		},
		UpdateFunc: func(_, obj interface{}) {
			if s, ok := obj.(metav1.Object).GetAnnotations()[sentAnnotation]; ok {
				lat.Load().observe(s)
			}
			if updates.Add(1) >= target.Load() {
				finish.Do(func() { close(updatesDone) })
			}
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-probe: %v\n", err)
		os.Exit(2)
	}
	stop := make(chan struct{})
	go informer.Run(stop)
	if !cache.WaitForCacheSync(context.Background().Done(), informer.HasSynced) {
		os.Exit(2)
	}
	syncMs := float64(time.Since(started).Microseconds()) / 1e3
	rssSync, listPeak := statusMB("VmRSS:"), statusMB("VmHWM:")
	<-addsDone
	// PEER_GO_HEAP=1: the live heap at sync (after a collection, which the watch's figures then
	// follow), and the sizes of the types a cached pod is made of, for the memory breakdown.
	var liveHeapMB interface{}
	if os.Getenv("PEER_GO_HEAP") == "1" {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		liveHeapMB = float64(m.HeapAlloc) / (1 << 20)
		fmt.Fprintf(os.Stderr, "go sizes: Pod %d, ObjectMeta %d, PodSpec %d, PodStatus %d, Container %d, Volume %d, ContainerStatus %d, ManagedFieldsEntry %d; live heap at sync %.1f MB\n",
			unsafe.Sizeof(corev1.Pod{}), unsafe.Sizeof(metav1.ObjectMeta{}), unsafe.Sizeof(corev1.PodSpec{}),
			unsafe.Sizeof(corev1.PodStatus{}), unsafe.Sizeof(corev1.Container{}), unsafe.Sizeof(corev1.Volume{}),
			unsafe.Sizeof(corev1.ContainerStatus{}), unsafe.Sizeof(metav1.ManagedFieldsEntry{}), liveHeapMB)
	}
	// Reset the peak, so that VmHWM below is the watch's (as the bench does for its own clients).
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if line, _ := in.ReadString('\n'); strings.TrimSpace(line) != "go" {
		fmt.Fprintf(os.Stderr, "client-go-probe: expected go, got %q\n", line)
		os.Exit(2)
	}
	before := tasks()
	t0 := time.Now()
	if fake {
		// Every update of the fake server's comes after its release, which the bench makes
		// right after writing "go": the first may come before this read, and all count.
		target.Store(int64(events))
	} else {
		lat.Store(&latencies{})
		target.Store(updates.Load() + int64(events))
	}
	if updates.Load() >= target.Load() {
		finish.Do(func() { close(updatesDone) })
	}
	<-updatesDone
	took := time.Since(t0)
	after := tasks()
	n := float64(events)
	// Per event, or null for a run of no events (a sync alone): JSON has no NaN.
	perEvent := func(x float64) interface{} {
		if events == 0 {
			return nil
		}
		return x / n
	}
	result := map[string]interface{}{
		"events_per_s":                   perEvent(n * n / took.Seconds()), // n / took
		"sync_ms":                        syncMs,
		"rss_sync_mb":                    rssSync,
		"rss_end_mb":                     statusMB("VmRSS:"),
		"list_peak_rss_mb":               listPeak,
		"live_heap_mb":                   liveHeapMB,
		"watch_peak_rss_mb":              statusMB("VmHWM:"),
		"cpu_us_per_event":               perEvent(float64(after.cpuNs-before.cpuNs) / 1e3),
		"voluntary_switches_per_event":   perEvent(float64(after.voluntary - before.voluntary)),
		"involuntary_switches_per_event": perEvent(float64(after.involuntary - before.involuntary)),
		"latency_p50_us":                 lat.Load().quantile(0.5),
		"latency_p99_us":                 lat.Load().quantile(0.99),
	}
	out, _ := json.Marshal(result)
	fmt.Printf("result %s\n", out)
	close(stop)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// statusMB reads a /proc/self/status field in MB.
func statusMB(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

type taskTotals struct{ cpuNs, voluntary, involuntary int64 }

// tasks sums every live thread's CPU (schedstat, nanoseconds) and context switches, as the bench
// reads its own clients'.
func tasks() taskTotals {
	var t taskTotals
	dirs, _ := filepath.Glob("/proc/self/task/*")
	for _, d := range dirs {
		if b, err := os.ReadFile(d + "/schedstat"); err == nil {
			if f := strings.Fields(string(b)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				t.cpuNs += ns
			}
		}
		if b, err := os.ReadFile(d + "/status"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				if len(f) != 2 {
					continue
				}
				v, _ := strconv.ParseInt(f[1], 10, 64)
				switch f[0] {
				case "voluntary_ctxt_switches:":
					t.voluntary += v
				case "nonvoluntary_ctxt_switches:":
					t.involuntary += v
				}
			}
		}
	}
	return t
}

// latencies counts microsecond latencies exactly below 10 ms and in 100 µs steps up to 1 s, in
// a histogram made before the watch (so that it adds no memory during it).
type latencies struct {
	fine   [10000]atomic.Int64
	coarse [9900]atomic.Int64
	count  atomic.Int64
}

func (l *latencies) observe(sent string) {
	us, err := strconv.ParseInt(sent, 10, 64)
	if err != nil {
		return
	}
	d := time.Now().UnixMicro() - us
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < 10000:
		l.fine[d].Add(1)
	default:
		i := (d - 10000) / 100
		if i >= int64(len(l.coarse)) {
			i = int64(len(l.coarse)) - 1
		}
		l.coarse[i].Add(1)
	}
	l.count.Add(1)
}

// quantile gives the q-quantile in µs, or nil when nothing was observed (an unpaced run).
func (l *latencies) quantile(q float64) interface{} {
	total := l.count.Load()
	if total == 0 {
		return nil
	}
	rank := int64(q * float64(total-1))
	var seen int64
	for i := range l.fine {
		seen += l.fine[i].Load()
		if seen > rank {
			return float64(i)
		}
	}
	for i := range l.coarse {
		seen += l.coarse[i].Load()
		if seen > rank {
			return float64(10000 + i*100 + 50)
		}
	}
	return nil
}
