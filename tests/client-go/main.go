// Command client-go-probe drives the simulated API server with client-go itself, speaking
// protobuf as Kubernetes' own components do (`ContentType: application/vnd.kubernetes.protobuf`):
// typed writes with protobuf bodies, gets, lists, a scale subresource, a typed NotFound error,
// a shared informer's list and watch, and the metadata client's list and watch. It prints one line per check and exits non-zero
// unless every check passes.
//
// It is configured by the environment, so that it needs no kubeconfig loader:
//
//	SIM_URL    the server's URL (https://127.0.0.1:PORT)
//	SIM_TOKEN  a bearer token, when the server asks for one
//	SIM_CA     the CA certificate's path, for https
//	PROBE_NAMESPACE  the namespace it creates and works in (default client-go-probe)
//	PROBE_VERBOSE    when set, every request's method, path and content types are printed
//	PROBE_MODE       "leader" runs one client-go leader elector instead (see leaderMode),
//	                 "peer" client-go's side of the peer benchmark (see peerMode)
//	PROBE_FAULTS     set when the server injects faults: a streaming initial list may then
//	                 fall back to a list, as client-go does after a failed attempt
//
// client-go's own feature gates come from the environment too (KUBE_FEATURE_WatchListClient
// chooses between a paged list then a watch, and a watch that streams the initial list).
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	typedapps "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedcore "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// exchange is what the recording transport saw of one request and its response.
type exchange struct {
	method, path, query, requestType, responseType, accept string
	status                                                 int
	err                                                    error
}

func (e exchange) print() {
	fmt.Printf("     %s %s?%s sent %q, answered %d %q (error: %v)\n", e.method, e.path, e.query, e.requestType, e.status, e.responseType, e.err)
}

// recorder keeps every exchange, so that the probe can show which encoding each one used.
type recorder struct {
	mu   sync.Mutex
	seen []exchange
	next http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	e := exchange{
		method:      req.Method,
		path:        req.URL.Path,
		query:       req.URL.RawQuery,
		requestType: req.Header.Get("Content-Type"),
		accept:      req.Header.Get("Accept"),
		err:         err,
	}
	if err == nil {
		e.responseType = resp.Header.Get("Content-Type")
		e.status = resp.StatusCode
	}
	r.mu.Lock()
	r.seen = append(r.seen, e)
	r.mu.Unlock()
	return resp, err
}

// watching tells whether the last request for the collection at path was a watch the server
// accepted.
func (r *recorder) watching(path string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.seen) - 1; i >= 0; i-- {
		e := r.seen[i]
		if e.method != http.MethodGet || e.path != path {
			continue
		}
		return e.err == nil && e.status == http.StatusOK && strings.Contains(e.query, "watch=true")
	}
	return false
}

func (r *recorder) snapshot() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.seen...)
}

type probe struct {
	failed, passed int
}

func (p *probe) check(name string, err error) {
	if err != nil {
		p.failed++
		fmt.Printf("FAIL %s: %v\n", name, err)
		return
	}
	p.passed++
	fmt.Printf("ok   %s\n", name)
}

func main() {
	url := os.Getenv("SIM_URL")
	if url == "" {
		fmt.Fprintln(os.Stderr, "client-go-probe: SIM_URL is not set")
		os.Exit(2)
	}
	rec := &recorder{}
	cfg := &rest.Config{
		Host:            url,
		BearerToken:     os.Getenv("SIM_TOKEN"),
		TLSClientConfig: rest.TLSClientConfig{CAFile: os.Getenv("SIM_CA")},
		Timeout:         30 * time.Second,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			rec.next = rt
			return rec
		},
	}
	// Assigned, not set in the literal: older client-go releases (Debian's 0.32) have these
	// only through Config's embedded ContentConfig, which a literal cannot name this way.
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	if os.Getenv("PROBE_MODE") == "leader" {
		leaderMode(cfg)
		return
	}
	if os.Getenv("PROBE_MODE") == "peer" {
		peerMode(cfg)
		return
	}
	core, err := typedcore.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-probe: core client: %v\n", err)
		os.Exit(2)
	}
	apps, err := typedapps.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-probe: apps client: %v\n", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := &probe{}
	ns := os.Getenv("PROBE_NAMESPACE")
	if ns == "" {
		ns = "client-go-probe"
	}
	_, err = core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	p.check("create namespace "+ns, err)

	// Typed writes and reads of a ConfigMap.
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-cm", Labels: map[string]string{"probe": "client-go"}},
		Data:       map[string]string{"a": "1"},
	}
	created, err := core.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	p.check("create configmap", err)
	if err == nil {
		p.check("created configmap has a uid and a resourceVersion", expect(created.UID != "" && created.ResourceVersion != "", "uid %q rv %q", created.UID, created.ResourceVersion))
		created.Data["b"] = "2"
		updated, err := core.ConfigMaps(ns).Update(ctx, created, metav1.UpdateOptions{})
		p.check("update configmap", err)
		if err == nil {
			p.check("update changed the resourceVersion", expect(updated.ResourceVersion != created.ResourceVersion, "still %q", updated.ResourceVersion))
		}
	}
	got, err := core.ConfigMaps(ns).Get(ctx, "probe-cm", metav1.GetOptions{})
	p.check("get configmap", err)
	if err == nil {
		p.check("get returns the updated data", expect(got.Data["a"] == "1" && got.Data["b"] == "2", "data %v", got.Data))
	}
	list, err := core.ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "probe=client-go"})
	p.check("list configmaps by label", err)
	if err == nil {
		p.check("the list holds the one configmap", expect(len(list.Items) == 1 && list.ResourceVersion != "", "%d items, rv %q", len(list.Items), list.ResourceVersion))
	}
	_, err = core.ConfigMaps(ns).Get(ctx, "no-such-configmap", metav1.GetOptions{})
	p.check("a missing object is a typed NotFound", expect(apierrors.IsNotFound(err), "got %v", err))
	p.check("delete configmap", core.ConfigMaps(ns).Delete(ctx, "probe-cm", metav1.DeleteOptions{}))

	// A Deployment and its scale subresource.
	replicas := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-deploy"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "probe"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "probe"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
	}
	_, err = apps.Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	p.check("create deployment", err)
	scale, err := apps.Deployments(ns).GetScale(ctx, "probe-deploy", metav1.GetOptions{})
	p.check("get the deployment's scale", err)
	if err == nil {
		p.check("the scale reads the deployment's replicas", expect(scale.Spec.Replicas == 2, "replicas %d", scale.Spec.Replicas))
	}

	// A shared informer of pods: the initial list, then watched creates, an update, a delete.
	for i := 0; i < 3; i++ {
		_, err := core.Pods(ns).Create(ctx, pod(fmt.Sprintf("before-%d", i)), metav1.CreateOptions{})
		p.check(fmt.Sprintf("create pod before-%d", i), err)
	}
	var mu sync.Mutex
	events := []string{}
	record := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	informer := cache.NewSharedIndexInformer(
		cache.NewListWatchFromClient(core.RESTClient(), "pods", ns, fields.Everything()),
		&corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	)
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { record("add " + obj.(*corev1.Pod).Name) },
		UpdateFunc: func(old, new interface{}) {
			if old.(*corev1.Pod).ResourceVersion != new.(*corev1.Pod).ResourceVersion {
				record("update " + new.(*corev1.Pod).Name)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			record("delete " + obj.(*corev1.Pod).Name)
		},
	})
	p.check("add an event handler", err)
	stop := make(chan struct{})
	go informer.Run(stop)
	p.check("the informer syncs", expect(cache.WaitForCacheSync(ctx.Done(), informer.HasSynced), "not synced in time"))
	p.check("the synced cache holds the three pods", expect(len(informer.GetIndexer().ListKeys()) == 3, "keys %v", informer.GetIndexer().ListKeys()))

	for i := 0; i < 2; i++ {
		_, err := core.Pods(ns).Create(ctx, pod(fmt.Sprintf("after-%d", i)), metav1.CreateOptions{})
		p.check(fmt.Sprintf("create pod after-%d", i), err)
	}
	if cur, err := core.Pods(ns).Get(ctx, "before-0", metav1.GetOptions{}); err == nil {
		cur.Labels["touched"] = "yes"
		_, err = core.Pods(ns).Update(ctx, cur, metav1.UpdateOptions{})
		p.check("update pod before-0", err)
	} else {
		p.check("get pod before-0", err)
	}
	p.check("delete pod before-1", core.Pods(ns).Delete(ctx, "before-1", metav1.DeleteOptions{}))

	// heard waits for the handler to have heard as many events as want holds, then checks them.
	heard := func(name string, want []string) {
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return len(events) >= len(want), nil
		})
		mu.Lock()
		seen := append([]string(nil), events...)
		mu.Unlock()
		sort.Strings(seen)
		p.check(name, expect(err == nil && strings.Join(seen, ",") == strings.Join(want, ","), "heard %v", seen))
	}
	want := []string{"add after-0", "add after-1", "add before-0", "add before-1", "add before-2", "delete before-1", "update before-0"}
	heard("the handler hears the list and every watched change", want)
	if obj, ok, _ := informer.GetIndexer().GetByKey(ns + "/before-0"); ok {
		p.check("the cached pod carries the update", expect(obj.(*corev1.Pod).Labels["touched"] == "yes", "labels %v", obj.(*corev1.Pod).Labels))
	} else {
		p.check("the cached pod carries the update", fmt.Errorf("%s/before-0 is not cached", ns))
	}

	// A second round once the informer watches again (after a fault, client-go may have
	// caught the first round up by listing): these changes travel in a watch.
	podsPath := "/api/v1/namespaces/" + ns + "/pods"
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return rec.watching(podsPath), nil
	})
	p.check("the informer watches", err)
	for i := 0; i < 2; i++ {
		_, err := core.Pods(ns).Create(ctx, pod(fmt.Sprintf("late-%d", i)), metav1.CreateOptions{})
		p.check(fmt.Sprintf("create pod late-%d", i), err)
	}
	p.check("delete pod after-0", core.Pods(ns).Delete(ctx, "after-0", metav1.DeleteOptions{}))
	want = append(want, "add late-0", "add late-1", "delete after-0")
	sort.Strings(want)
	heard("the handler hears the second round", want)
	keys := informer.GetIndexer().ListKeys()
	sort.Strings(keys)
	wantKeys := []string{ns + "/after-1", ns + "/before-0", ns + "/before-2", ns + "/late-0", ns + "/late-1"}
	p.check("the cache equals the server", expect(strings.Join(keys, ",") == strings.Join(wantKeys, ","), "keys %v", keys))
	close(stop)

	// The metadata client: lists and watches of PartialObjectMetadata, in protobuf.
	podsRes := corev1.SchemeGroupVersion.WithResource("pods")
	if mc, err := metadata.NewForConfig(cfg); err != nil {
		p.check("metadata client", err)
	} else if ml, err := mc.Resource(podsRes).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		p.check("list pods' metadata", err)
	} else {
		names := []string{}
		for _, m := range ml.Items {
			names = append(names, m.Namespace+"/"+m.Name)
		}
		sort.Strings(names)
		p.check("list pods' metadata", expect(strings.Join(names, ",") == strings.Join(wantKeys, ","), "names %v", names))
		w, err := mc.Resource(podsRes).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: ml.ResourceVersion})
		p.check("watch pods' metadata", err)
		if err == nil {
			_, err := core.Pods(ns).Create(ctx, pod("meta-0"), metav1.CreateOptions{})
			p.check("create pod meta-0", err)
			select {
			case ev := <-w.ResultChan():
				m, ok := ev.Object.(*metav1.PartialObjectMetadata)
				p.check("the metadata watch sends the new pod's metadata", expect(ok && ev.Type == "ADDED" && m.Name == "meta-0" && m.Labels["probe"] == "client-go", "event %s %T", ev.Type, ev.Object))
			case <-time.After(30 * time.Second):
				p.check("the metadata watch sends the new pod's metadata", fmt.Errorf("no event in 30 s"))
			}
			w.Stop()
		}
	}

	// Which encoding every exchange used.
	var lists, watches, gets, bodies, podLists, podStreams, metadataAnswers int
	for _, e := range rec.snapshot() {
		if os.Getenv("PROBE_VERBOSE") != "" {
			e.print()
		}
		if e.err != nil {
			continue
		}
		isWatch := strings.Contains(e.query, "watch=true") || strings.Contains(e.query, "watch=1")
		if strings.HasPrefix(e.accept, protobuf+";as=PartialObjectMetadata") {
			metadataAnswers++
		} else if e.method == http.MethodGet && strings.HasSuffix(e.path, "/pods") {
			switch {
			case isWatch && strings.Contains(e.query, "sendInitialEvents=true"):
				podStreams++
			case !isWatch:
				podLists++
			}
		}
		if e.requestType != "" && e.requestType != protobuf && e.method != http.MethodDelete {
			p.check(fmt.Sprintf("%s %s sends protobuf", e.method, e.path), fmt.Errorf("sent %q", e.requestType))
		}
		if e.requestType == protobuf {
			bodies++
		}
		if !strings.HasPrefix(e.responseType, protobuf) {
			p.check(fmt.Sprintf("%s %s?%s is answered in protobuf", e.method, e.path, e.query), fmt.Errorf("answered %q (status %d)", e.responseType, e.status))
			continue
		}
		switch {
		case e.method == http.MethodGet && isWatch:
			watches++
		case e.method == http.MethodGet && strings.HasSuffix(e.path, "s"):
			lists++
		case e.method == http.MethodGet:
			gets++
		}
	}
	p.check("protobuf bodies were sent", expect(bodies >= 7, "%d protobuf bodies", bodies))
	p.check("protobuf lists, gets and watches were read", expect(lists >= 1 && gets >= 2 && watches >= 1, "lists %d, gets %d, watches %d", lists, gets, watches))
	p.check("the metadata client asked for PartialObjectMetadata in protobuf, and got protobuf", expect(metadataAnswers >= 2, "%d answers", metadataAnswers))
	switch os.Getenv("KUBE_FEATURE_WatchListClient") {
	case "true":
		// Under faults client-go may give up on streaming and list instead, as it should.
		faulted := os.Getenv("PROBE_FAULTS") != ""
		p.check("the informer streamed its initial list in a watch", expect(podStreams >= 1 && (podLists == 0 || faulted), "%d streaming watches, %d lists of pods", podStreams, podLists))
	case "false":
		p.check("the informer listed, then watched", expect(podStreams == 0 && podLists >= 1, "%d streaming watches, %d lists of pods", podStreams, podLists))
	}

	// What client-go does in JSON, its default encoding.
	jsonChecks(ctx, p, cfg, ns)

	fmt.Printf("%d of %d checks pass\n", p.passed, p.passed+p.failed)
	if p.failed > 0 {
		os.Exit(1)
	}
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"probe": "client-go"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
}

func expect(ok bool, format string, args ...interface{}) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
