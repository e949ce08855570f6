package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes/scheme"
	typedapps "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedcore "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

var (
	crdRes    = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgetRes = schema.GroupVersionResource{Group: "probe.example.com", Version: "v1", Resource: "widgets"}
)

// jsonChecks drives what client-go does in JSON, its default: discovery, a CustomResourceDefinition
// and its custom resources through the dynamic client and a dynamic informer, a strategic merge
// patch and server-side apply.
func jsonChecks(ctx context.Context, p *probe, base *rest.Config, ns string) {
	cfg := rest.CopyConfig(base)
	cfg.ContentType = ""
	cfg.AcceptContentTypes = ""
	rec := &recorder{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		rec.next = rt
		return rec
	}
	defer func() {
		if os.Getenv("PROBE_VERBOSE") != "" {
			for _, e := range rec.snapshot() {
				e.print()
			}
		}
	}()

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		p.check("discovery client", err)
		return
	}
	groups, lists, err := dc.ServerGroupsAndResources()
	p.check("discovery: groups and resources", err)
	names := map[string]bool{}
	for _, g := range groups {
		names[g.Name] = true
	}
	p.check("discovery names the built-in groups", expect(names[""] && names["apps"] && names["coordination.k8s.io"] && names["apiextensions.k8s.io"], "groups %v", names))
	podsListWatch := false
	for _, l := range lists {
		if l.GroupVersion != "v1" {
			continue
		}
		for _, r := range l.APIResources {
			if r.Name == "pods" && r.Namespaced && hasAll(r.Verbs, "list", "watch", "create", "delete") {
				podsListWatch = true
			}
		}
	}
	p.check("discovery: pods are namespaced, listed and watched", expect(podsListWatch, "pods not found with their verbs"))
	aggregated, perVersion := 0, 0
	for _, e := range rec.snapshot() {
		switch {
		case (e.path == "/api" || e.path == "/apis") && strings.Contains(e.responseType, "as=APIGroupDiscoveryList"):
			aggregated++
		case strings.HasPrefix(e.path, "/api/") || strings.HasPrefix(e.path, "/apis/"):
			perVersion++
		}
	}
	p.check("discovery is aggregated: two requests, none per version", expect(aggregated == 2 && perVersion == 0, "%d aggregated answers, %d per-version requests", aggregated, perVersion))

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		p.check("dynamic client", err)
		return
	}
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": "widgets.probe.example.com"},
		"spec": map[string]interface{}{
			"group": "probe.example.com",
			"scope": "Namespaced",
			"names": map[string]interface{}{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object",
					"properties": map[string]interface{}{
						"spec": map[string]interface{}{
							"type": "object",
							"properties": map[string]interface{}{
								"size":  map[string]interface{}{"type": "integer", "minimum": int64(0)},
								"color": map[string]interface{}{"type": "string", "default": "blue"},
							},
						},
					},
				}},
			}},
		},
	}}
	if _, err := dyn.Resource(crdRes).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		p.check("create a CustomResourceDefinition", err)
		return
	}
	p.check("create a CustomResourceDefinition", nil)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		l, err := dc.ServerResourcesForGroupVersion("probe.example.com/v1")
		return err == nil && len(l.APIResources) > 0, nil
	})
	p.check("discovery serves the new group", err)

	// A dynamic informer of widgets, started before any exists.
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	informer := factory.ForResource(widgetRes).Informer()
	added := make(chan string, 16)
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { added <- obj.(*unstructured.Unstructured).GetName() },
	})
	p.check("a dynamic informer of widgets", err)
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	p.check("the dynamic informer syncs", expect(cache.WaitForCacheSync(ctx.Done(), informer.HasSynced), "not synced"))

	widget := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "probe.example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]interface{}{"name": "w1"},
		"spec":       map[string]interface{}{"size": int64(1)},
	}}
	w, err := dyn.Resource(widgetRes).Namespace(ns).Create(ctx, widget, metav1.CreateOptions{})
	p.check("create a widget", err)
	if err == nil {
		color, _, _ := unstructured.NestedString(w.Object, "spec", "color")
		p.check("the widget gets its schema's default", expect(color == "blue", "color %q", color))
	}
	bad := widget.DeepCopy()
	bad.SetName("w-bad")
	_ = unstructured.SetNestedField(bad.Object, int64(-1), "spec", "size")
	_, err = dyn.Resource(widgetRes).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{})
	p.check("a widget against its schema is Invalid", expect(apierrors.IsInvalid(err), "got %v", err))
	select {
	case name := <-added:
		p.check("the dynamic informer hears the widget", expect(name == "w1", "heard %q", name))
	case <-time.After(30 * time.Second):
		p.check("the dynamic informer hears the widget", fmt.Errorf("nothing in 30 s"))
	}
	patched, err := dyn.Resource(widgetRes).Namespace(ns).Patch(ctx, "w1", types.MergePatchType, []byte(`{"spec":{"size":3}}`), metav1.PatchOptions{})
	p.check("merge-patch a widget", err)
	if err == nil {
		size, _, _ := unstructured.NestedInt64(patched.Object, "spec", "size")
		p.check("the patch is applied", expect(size == 3, "size %d", size))
	}
	_, err = dyn.Resource(widgetRes).Namespace(ns).Patch(ctx, "w1", types.StrategicMergePatchType, []byte(`{"spec":{"size":4}}`), metav1.PatchOptions{})
	p.check("a strategic merge patch of a custom resource is refused 415", expect(apierrors.IsUnsupportedMediaType(err), "got %v", err))

	// A strategic merge patch of a Deployment's containers, merged by name.
	apps, err := typedapps.NewForConfig(cfg)
	if err != nil {
		p.check("apps client", err)
		return
	}
	d, err := apps.Deployments(ns).Patch(ctx, "probe-deploy", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}`), metav1.PatchOptions{})
	p.check("strategic-merge-patch a deployment", err)
	if err == nil {
		images := []string{}
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Name+"="+c.Image)
		}
		sort.Strings(images)
		p.check("the containers merge by name", expect(strings.Join(images, ",") == "c=nginx,sidecar=busybox", "containers %v", images))
	}

	// Server-side apply: two managers, a conflict, and a forced apply.
	core, err := typedcore.NewForConfig(cfg)
	if err != nil {
		p.check("core client", err)
		return
	}
	apply := func(manager, value string, force bool) (*corev1.ConfigMap, error) {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"applied"},"data":{"key":%q}}`, value)
		opts := metav1.PatchOptions{FieldManager: manager}
		if force {
			opts.Force = &force
		}
		return core.ConfigMaps(ns).Patch(ctx, "applied", types.ApplyPatchType, []byte(body), opts)
	}
	_, err = apply("probe-a", "one", false)
	p.check("server-side apply creates", err)
	_, err = apply("probe-b", "two", false)
	p.check("another manager's apply of the same field conflicts", expect(apierrors.IsConflict(err), "got %v", err))
	cm, err := apply("probe-b", "two", true)
	p.check("a forced apply takes the field", err)
	if err == nil {
		managers := []string{}
		for _, m := range cm.ManagedFields {
			managers = append(managers, m.Manager)
		}
		p.check("the field changes hands", expect(cm.Data["key"] == "two" && strings.Join(managers, ",") == "probe-b", "data %v, managers %v", cm.Data, managers))
	}

	// Events through client-go's recorder: the first created, its repeats patched into a count;
	// the same Event read back through events.k8s.io/v1.
	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcore.EventSinkImpl{Interface: core.Events(ns)})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "client-go-probe"})
	ref := &corev1.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "applied"}
	for i := 0; i < 3; i++ {
		recorder.Event(ref, corev1.EventTypeNormal, "Probed", "the probe was here")
	}
	var count int32
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		l, err := core.Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Probed"})
		if err != nil || len(l.Items) != 1 {
			return false, nil
		}
		count = l.Items[0].Count
		return count == 3, nil
	})
	p.check("the recorder's repeats become one event counted 3", expect(err == nil, "count %d", count))
	evs, err := dyn.Resource(schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	p.check("list events.k8s.io/v1 events", err)
	if err == nil {
		found := false
		for _, e := range evs.Items {
			if reason, _, _ := unstructured.NestedString(e.Object, "reason"); reason == "Probed" {
				n, _, _ := unstructured.NestedInt64(e.Object, "deprecatedCount")
				kind, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
				found = n == 3 && kind == "ConfigMap"
			}
		}
		p.check("the same event in events.k8s.io/v1, counted", expect(found, "%d events, none Probed with deprecatedCount 3", len(evs.Items)))
	}
}

func hasAll(verbs metav1.Verbs, want ...string) bool {
	have := map[string]bool{}
	for _, v := range verbs {
		have[v] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}
