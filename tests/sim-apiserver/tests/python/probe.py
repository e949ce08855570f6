"""The python client probe: named steps a user of the official `kubernetes` client runs.

Usage: probe.py KUBECONFIG. Prints `PASS name` or `FAIL name [area]: why` per step, then
`N of M steps pass`; exits 0 only when every step passes. A step tagged with an area depends on
another part of issue 33 (`smp`: strategic merge patch, `authz`: DELETE answering a Status).
The server must serve `widgets` of `example.com/v1` (namespaced) for the custom object steps.
"""

import datetime
import json
import sys
import threading
import traceback

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

NS = "py"
STEPS = []


def step(name, area=None):
    def register(fn):
        STEPS.append((name, area, fn))
        return fn

    return register


def expect(cond, why):
    if not cond:
        raise AssertionError(why)


def status_of(call):
    """The HTTP status of the ApiException `call` raises (failing if it raises none)."""
    try:
        call()
    except ApiException as e:
        return e.status
    raise AssertionError("no ApiException")


def pod(name, labels=None, image="busybox"):
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image=image)]),
    )


def cm(name, data=None, labels=None):
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels=labels or {}), data=data or {}
    )


def deployment(name):
    labels = {"app": name}
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(
                    containers=[client.V1Container(name="main", image="nginx")]
                ),
            ),
        ),
    )


def main(kubeconfig):
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()
    apps = client.AppsV1Api()
    coord = client.CoordinationV1Api()
    events = client.EventsV1Api()
    custom = client.CustomObjectsApi()
    state = {}

    @step("version")
    def _():
        v = client.VersionApi().get_code()
        expect(v.git_version.startswith("v1."), v.git_version)

    @step("core api versions")
    def _():
        expect("v1" in client.CoreApi().get_api_versions().versions, "no v1")

    @step("api groups")
    def _():
        names = [g.name for g in client.ApisApi().get_api_versions().groups]
        expect("apps" in names and "coordination.k8s.io" in names, names)

    @step("create namespace")
    def _():
        ns = core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
        expect(ns.status.phase == "Active", ns.status)

    @step("read namespace")
    def _():
        expect(core.read_namespace(NS).metadata.name == NS, "wrong name")

    @step("create pod")
    def _():
        p = core.create_namespaced_pod(NS, pod("p1", {"app": "web"}))
        expect(p.metadata.uid and p.metadata.resource_version, "no uid/resourceVersion")
        expect(p.status.phase == "Pending", p.status.phase)

    @step("create pod with generateName")
    def _():
        body = pod(None, {"app": "gen"})
        body.metadata.generate_name = "gen-"
        p = core.create_namespaced_pod(NS, body)
        expect(p.metadata.name.startswith("gen-") and len(p.metadata.name) == 9, p.metadata.name)

    @step("create existing pod is 409")
    def _():
        expect(status_of(lambda: core.create_namespaced_pod(NS, pod("p1"))) == 409, "not 409")

    @step("create invalid name is 422")
    def _():
        expect(status_of(lambda: core.create_namespaced_config_map(NS, cm("Bad_Name"))) == 422, "not 422")

    @step("read pod")
    def _():
        expect(core.read_namespaced_pod("p1", NS).spec.containers[0].image == "busybox", "image")

    @step("read missing pod is 404")
    def _():
        try:
            core.read_namespaced_pod("nosuch", NS)
        except ApiException as e:
            expect(e.status == 404 and '"reason":"NotFound"' in e.body.replace(" ", ""), e.body)
            return
        raise AssertionError("no ApiException")

    @step("list pods by label selector")
    def _():
        names = [p.metadata.name for p in core.list_namespaced_pod(NS, label_selector="app=web").items]
        expect(names == ["p1"], names)

    @step("list pods by field selector")
    def _():
        items = core.list_namespaced_pod(NS, field_selector="metadata.name=p1,status.phase=Pending").items
        expect([p.metadata.name for p in items] == ["p1"], items)

    @step("list pods in all namespaces")
    def _():
        nss = {p.metadata.namespace for p in core.list_pod_for_all_namespaces().items}
        expect(NS in nss, nss)

    @step("paginate with limit and continue")
    def _():
        for i in range(5):
            core.create_namespaced_config_map(NS, cm("page-%d" % i, labels={"page": "yes"}))
        seen, token, rvs = [], None, set()
        while True:
            page = core.list_namespaced_config_map(NS, label_selector="page=yes", limit=2, _continue=token)
            seen += [c.metadata.name for c in page.items]
            rvs.add(page.metadata.resource_version)
            token = page.metadata._continue
            if not token:
                break
        expect(seen == ["page-%d" % i for i in range(5)], seen)
        expect(len(rvs) == 1, "pages at different resourceVersions: %s" % rvs)

    @step("garbled continue token is 400")
    def _():
        expect(status_of(lambda: core.list_namespaced_config_map(NS, limit=1, _continue="garbage")) == 400, "not 400")

    @step("replace configmap")
    def _():
        c = core.read_namespaced_config_map("page-0", NS)
        c.data = {"k": "v"}
        r = core.replace_namespaced_config_map("page-0", NS, c)
        expect(r.data == {"k": "v"}, r.data)
        state["stale"] = c

    @step("replace with stale resourceVersion is 409")
    def _():
        expect(status_of(lambda: core.replace_namespaced_config_map("page-0", NS, state["stale"])) == 409, "not 409")

    @step("merge patch")
    def _():
        r = core.patch_namespaced_config_map(
            "page-0", NS, {"data": {"m": "1"}}, _content_type="application/merge-patch+json"
        )
        expect(r.data == {"k": "v", "m": "1"}, r.data)

    @step("json patch")
    def _():
        r = core.patch_namespaced_config_map("page-0", NS, [{"op": "replace", "path": "/data/m", "value": "2"}])
        expect(r.data["m"] == "2", r.data)

    @step("json patch failed test is 422")
    def _():
        body = [{"op": "test", "path": "/data/m", "value": "nope"}]
        expect(status_of(lambda: core.patch_namespaced_config_map("page-0", NS, body)) == 422, "not 422")

    @step("server-side apply")
    def _():
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}}
        r = core.patch_namespaced_config_map(
            "applied", NS, body, field_manager="py", _content_type="application/apply-patch+yaml"
        )
        expect(r.data == {"a": "1"} and r.metadata.managed_fields[0].manager == "py", r.metadata)

    @step("dry-run create stores nothing")
    def _():
        core.create_namespaced_config_map(NS, cm("dry"), dry_run="All")
        expect(status_of(lambda: core.read_namespaced_config_map("dry", NS)) == 404, "stored")

    @step("create deployment")
    def _():
        d = apps.create_namespaced_deployment(NS, deployment("web"))
        expect(d.metadata.generation == 1, d.metadata.generation)

    @step("strategic merge patch keeps other containers", area="smp")
    def _():
        body = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "busybox"}]}}}}
        d = apps.patch_namespaced_deployment(
            "web", NS, body, _content_type="application/strategic-merge-patch+json"
        )
        names = sorted(c.name for c in d.spec.template.spec.containers)
        expect(names == ["main", "side"], names)

    @step("read scale subresource")
    def _():
        s = apps.read_namespaced_deployment_scale("web", NS)
        expect(s.kind == "Scale" and s.spec.replicas == 1, s)

    @step("patch scale subresource")
    def _():
        s = apps.patch_namespaced_deployment_scale(
            "web", NS, {"spec": {"replicas": 3}}, _content_type="application/merge-patch+json"
        )
        expect(s.spec.replicas == 3, s.spec)
        expect(apps.read_namespaced_deployment("web", NS).spec.replicas == 3, "spec.replicas")

    @step("replace status subresource")
    def _():
        d = apps.read_namespaced_deployment("web", NS)
        d.status = client.V1DeploymentStatus(replicas=3, ready_replicas=3, observed_generation=d.metadata.generation)
        d.spec.replicas = 9
        r = apps.replace_namespaced_deployment_status("web", NS, d)
        expect(r.status.ready_replicas == 3 and r.spec.replicas == 3, (r.status, r.spec.replicas))

    @step("patch pod status")
    def _():
        r = core.patch_namespaced_pod_status(
            "p1", NS, {"status": {"message": "probed"}}, _content_type="application/merge-patch+json"
        )
        expect(r.status.message == "probed", r.status)

    @step("lease create and update")
    def _():
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name="leader"), spec=client.V1LeaseSpec(holder_identity="a")
        )
        coord.create_namespaced_lease(NS, lease)
        got = coord.read_namespaced_lease("leader", NS)
        got.spec.holder_identity = "b"
        r = coord.replace_namespaced_lease("leader", NS, got)
        expect(r.spec.holder_identity == "b", r.spec)

    @step("core event with field selector")
    def _():
        ev = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name="ev1"),
            involved_object=client.V1ObjectReference(kind="Pod", name="p1", namespace=NS),
            reason="Probed", message="hello", type="Normal",
        )
        core.create_namespaced_event(NS, ev)
        items = core.list_namespaced_event(NS, field_selector="involvedObject.name=p1").items
        expect([e.metadata.name for e in items] == ["ev1"], items)

    @step("events.k8s.io event is a core event", area="authz")
    def _():
        # A datetime, as the client serialises one: with its microseconds. A whole-second
        # time would go out without them, which kube-apiserver refuses (next step).
        when = datetime.datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=datetime.timezone.utc)
        ev = client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="ev2"), event_time=when,
            reporting_controller="py/probe", reporting_instance="probe-1", action="Probe",
            reason="Probed", type="Normal", note="hi",
            regarding=client.V1ObjectReference(kind="Pod", name="p1", namespace=NS),
        )
        events.create_namespaced_event(NS, ev)
        names = [e.metadata.name for e in core.list_namespaced_event(NS).items]
        expect("ev2" in names, names)

    @step("an event time without microseconds is refused", area="authz")
    def _():
        whole = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        ev = client.EventsV1Event(
            metadata=client.V1ObjectMeta(name="ev3"), event_time=whole,
            reporting_controller="py/probe", reporting_instance="probe-1", action="Probe",
            reason="Probed", type="Normal", note="hi",
            regarding=client.V1ObjectReference(kind="Pod", name="p1", namespace=NS),
        )
        try:
            events.create_namespaced_event(NS, ev)
        except ApiException as e:
            message = json.loads(e.body).get("message", "")
            expect(e.status == 400 and 'cannot parse "+00:00" as ".000000"' in message, e.body)
            return
        raise AssertionError("a whole-second MicroTime was accepted")

    @step("watch from a resourceVersion")
    def _():
        rv = core.list_namespaced_pod(NS).metadata.resource_version
        core.create_namespaced_pod(NS, pod("watched"))
        w = watch.Watch()
        got = None
        for ev in w.stream(core.list_namespaced_pod, NS, resource_version=rv, timeout_seconds=10):
            got = (ev["type"], ev["object"].metadata.name)
            w.stop()
        expect(got == ("ADDED", "watched"), got)

    @step("watch sees a change made meanwhile")
    def _():
        rv = core.list_namespaced_config_map(NS).metadata.resource_version
        timer = threading.Timer(0.5, lambda: core.create_namespaced_config_map(NS, cm("later")))
        w = watch.Watch()
        got = None
        timer.start()
        for ev in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=10):
            got = (ev["type"], ev["object"].metadata.name)
            w.stop()
        timer.join()
        expect(got == ("ADDED", "later"), got)

    @step("watch ends at timeoutSeconds")
    def _():
        rv = coord.list_namespaced_lease(NS).metadata.resource_version
        events_seen = list(watch.Watch().stream(coord.list_namespaced_lease, NS, resource_version=rv, timeout_seconds=1))
        expect(events_seen == [], events_seen)

    @step("custom object create, get, list, patch")
    def _():
        body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "labels": {"k": "v"}}, "spec": {"size": 1}}
        custom.create_namespaced_custom_object("example.com", "v1", NS, "widgets", body)
        got = custom.get_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1")
        expect(got["spec"]["size"] == 1, got)
        items = custom.list_namespaced_custom_object("example.com", "v1", NS, "widgets", label_selector="k=v")["items"]
        expect([i["metadata"]["name"] for i in items] == ["w1"], items)
        r = custom.patch_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1", {"spec": {"size": 2}})
        expect(r["spec"]["size"] == 2, r)

    @step("custom object delete")
    def _():
        custom.delete_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1")
        expect(status_of(lambda: custom.get_namespaced_custom_object("example.com", "v1", NS, "widgets", "w1")) == 404, "still there")

    @step("delete answers a Status", area="authz")
    def _():
        r = core.delete_namespaced_config_map("applied", NS)
        # Client 37's delete answers are typed `object`: a plain dict, whatever the server sent.
        get = (lambda k: r.get(k)) if isinstance(r, dict) else (lambda k: getattr(r, k, None))
        expect(get("kind") == "Status" and get("status") == "Success", r)
        expect((get("details") or {}).get("name") == "applied", r)

    @step("delete pod")
    def _():
        core.delete_namespaced_pod("p1", NS)
        expect(status_of(lambda: core.read_namespaced_pod("p1", NS)) == 404, "still there")

    @step("delete missing is 404")
    def _():
        expect(status_of(lambda: core.delete_namespaced_config_map("nosuch", NS)) == 404, "not 404")

    @step("delete collection by label")
    def _():
        core.delete_collection_namespaced_config_map(NS, label_selector="page=yes")
        left = core.list_namespaced_config_map(NS, label_selector="page=yes").items
        expect(left == [], left)

    @step("delete namespace")
    def _():
        core.delete_namespace(NS)

    passed = 0
    for name, area, fn in STEPS:
        try:
            fn()
            passed += 1
            print("PASS %s" % name, flush=True)
        except Exception as e:  # every failure is reported, the probe goes on
            tag = " [%s]" % area if area else ""
            why = str(e) if isinstance(e, AssertionError) else traceback.format_exception_only(type(e), e)[-1]
            print("FAIL %s%s: %s" % (name, tag, why.strip().replace("\n", " ")[:400]), flush=True)
    print("%d of %d steps pass" % (passed, len(STEPS)), flush=True)
    return 0 if passed == len(STEPS) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
