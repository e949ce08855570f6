//! The kubectl probe: about a hundred named steps a user runs against a cluster, each one
//! kubectl invocation whose exit code and output are checked against what kube-apiserver would
//! give. Runs CI's kubectl, or the one `SIM_KUBECTL` names (to probe 1.28, 1.30, 1.33), prints
//! a pass/fail line per step and "N of M steps pass", and fails unless every step passes.
//!
//! Steps in [`not_served`] exercise features the simulator documents as absent (no kubelet, no
//! controllers). They run and are reported, but never fail the test. Typed `create
//! configmap|deployment|namespace` and `auth can-i|whoami` send protobuf request bodies from
//! kubectl 1.32 on: those steps are required like any other. A step
//! tagged with an `area` depends on one area of the simulator (strategic merge patch and
//! OpenAPI `smp`, CRDs and Table output `crd`, users/RBAC/discovery names/Status/events `authz`):
//! it counts like any other step, the tag only says where a failure belongs.
//!
//! The same steps run on a real kube-apiserver and etcd (the project's own build, see
//! docs/real-apiserver.md) when `REAL_APISERVER=1` or when both binaries are built: what a
//! step's hooks do (seeding, a controller's status write, a concurrent change) goes through
//! [`ProbeServer`], the simulator's test API on one side and plain HTTPS requests on the other,
//! so that a step passing on one server and failing on the other is a difference found. The
//! steps in [`differs_on_real`] are the exceptions, each with its reason.

#[path = "common/kubectl.rs"]
mod kubectl_common;

use std::sync::Arc;
use std::time::Duration;

use kubectl_common::{find_kubectl, Kube, Output};
use real_apiserver::{RealServer, ServerOptions, User};
use serde_json::{json, Value};
use sim_apiserver::SimServer;
use tokio::io::{AsyncBufReadExt, BufReader};

type SimFn = Arc<dyn Fn(&dyn ProbeServer) + Send + Sync>;
type CheckFn = Arc<dyn Fn(&dyn ProbeServer, &Output) -> Result<(), String> + Send + Sync>;

/// What a step's hooks need of the server under test, besides kubectl: the simulator's test
/// API, or HTTPS requests to a real kube-apiserver as its admin. `resource` is a plural with its
/// group (`deployments.apps`), as the simulator names resources.
trait ProbeServer: Send + Sync {
    /// The server's URL, as kubectl's kubeconfig names it.
    fn url(&self) -> String;
    /// Creates `obj` (a controller's or another user's write).
    fn create(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, String>;
    /// Reads one object back.
    fn get(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, String>;
    /// Replaces an object's status, as its controller would.
    fn update_status(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, String>;
    /// Deletes one object.
    fn delete(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<(), String>;
}

impl ProbeServer for SimServer {
    fn url(&self) -> String {
        SimServer::url(self)
    }
    fn create(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, String> {
        SimServer::create(self, resource, ns, obj).map_err(|e| format!("{e:?}"))
    }
    fn get(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, String> {
        SimServer::get(self, resource, ns, name).map_err(|e| format!("{e:?}"))
    }
    fn update_status(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, String> {
        // The simulator's test API writes the whole object, status included.
        SimServer::update(self, resource, ns, obj).map_err(|e| format!("{e:?}"))
    }
    fn delete(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<(), String> {
        SimServer::delete(self, resource, ns, name)
            .map(drop)
            .map_err(|e| format!("{e:?}"))
    }
}

/// A real kube-apiserver, reached by its admin's client certificate.
struct Real(RealServer);

impl Real {
    /// The path of `resource`'s collection (`name` and `sub` appended when given), and the
    /// `apiVersion` and `kind` its objects carry: only the resources the steps' hooks touch.
    fn path(
        resource: &str,
        ns: Option<&str>,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Result<(String, &'static str, &'static str), String> {
        let (prefix, api_version, kind) = match resource {
            "pods" => ("/api/v1", "v1", "Pod"),
            "configmaps" => ("/api/v1", "v1", "ConfigMap"),
            "services" => ("/api/v1", "v1", "Service"),
            "events" => ("/api/v1", "v1", "Event"),
            "namespaces" => ("/api/v1", "v1", "Namespace"),
            "deployments.apps" => ("/apis/apps/v1", "apps/v1", "Deployment"),
            "leases.coordination.k8s.io" => (
                "/apis/coordination.k8s.io/v1",
                "coordination.k8s.io/v1",
                "Lease",
            ),
            other => return Err(format!("the probe's real-server hooks do not know {other}")),
        };
        let plural = resource.split('.').next().unwrap_or(resource);
        let mut path = prefix.to_string();
        if let Some(ns) = ns {
            path.push_str(&format!("/namespaces/{ns}"));
        }
        path.push_str(&format!("/{plural}"));
        for part in [name, sub].into_iter().flatten() {
            path.push('/');
            path.push_str(part);
        }
        Ok((path, api_version, kind))
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let text = body.map(Value::to_string);
        let body = text.as_deref().map(|t| ("application/json", t.as_bytes()));
        let (status, answer) = self
            .0
            .request(User::Admin, method, path, body)
            .map_err(|e| e.to_string())?;
        if !(200..300).contains(&status) {
            return Err(format!("{method} {path}: {status} {answer}"));
        }
        serde_json::from_str(&answer).map_err(|e| format!("{method} {path}: {e}: {answer}"))
    }
}

impl ProbeServer for Real {
    fn url(&self) -> String {
        self.0.url().to_string()
    }
    fn create(&self, resource: &str, ns: Option<&str>, mut obj: Value) -> Result<Value, String> {
        let (path, api_version, kind) = Real::path(resource, ns, None, None)?;
        obj["apiVersion"] = json!(api_version);
        obj["kind"] = json!(kind);
        self.send("POST", &path, Some(&obj))
    }
    fn get(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<Value, String> {
        let (path, _, _) = Real::path(resource, ns, Some(name), None)?;
        self.send("GET", &path, None)
    }
    fn update_status(&self, resource: &str, ns: Option<&str>, obj: Value) -> Result<Value, String> {
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (path, _, _) = Real::path(resource, ns, Some(&name), Some("status"))?;
        self.send("PUT", &path, Some(&obj))
    }
    fn delete(&self, resource: &str, ns: Option<&str>, name: &str) -> Result<(), String> {
        let (path, _, _) = Real::path(resource, ns, Some(name), None)?;
        self.send("DELETE", &path, None).map(drop)
    }
}

/// One kubectl invocation and what kube-apiserver would make it print.
#[derive(Clone)]
struct Step {
    name: &'static str,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Run on the simulator before kubectl starts (what a controller would have done).
    before: Option<SimFn>,
    /// Run while kubectl is running: when a stdout line contains `trigger` (or at once).
    during: Option<SimFn>,
    trigger: Option<&'static str>,
    /// Streaming commands (`-w`) are stopped once every `out_has` string has appeared.
    streaming: bool,
    ok: bool,
    out_has: Vec<String>,
    out_lacks: Vec<String>,
    err_has: Vec<String>,
    out_empty: bool,
    check: Option<CheckFn>,
    area: Option<&'static str>,
    /// Oldest kubectl minor version that has the command.
    since: u32,
    limit: Duration,
}

/// Splits a command line on blanks, keeping single-quoted parts together.
fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// A step that must exit 0.
fn ok(name: &'static str, line: &str) -> Step {
    Step {
        name,
        args: split(line),
        env: Vec::new(),
        before: None,
        during: None,
        trigger: None,
        streaming: false,
        ok: true,
        out_has: Vec::new(),
        out_lacks: Vec::new(),
        err_has: Vec::new(),
        out_empty: false,
        check: None,
        area: None,
        since: 0,
        limit: Duration::from_secs(60),
    }
}

/// A step that must fail (non-zero exit).
fn fails(name: &'static str, line: &str) -> Step {
    Step {
        ok: false,
        ..ok(name, line)
    }
}

impl Step {
    fn has(mut self, parts: &[&str]) -> Self {
        self.out_has.extend(parts.iter().map(|s| s.to_string()));
        self
    }
    fn lacks(mut self, parts: &[&str]) -> Self {
        self.out_lacks.extend(parts.iter().map(|s| s.to_string()));
        self
    }
    fn err(mut self, parts: &[&str]) -> Self {
        self.err_has.extend(parts.iter().map(|s| s.to_string()));
        self
    }
    fn empty(mut self) -> Self {
        self.out_empty = true;
        self
    }
    fn area(mut self, a: &'static str) -> Self {
        self.area = Some(a);
        self
    }
    fn since(mut self, minor: u32) -> Self {
        self.since = minor;
        self
    }
    fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    fn before(mut self, f: impl Fn(&dyn ProbeServer) + Send + Sync + 'static) -> Self {
        self.before = Some(Arc::new(f));
        self
    }
    fn during(
        mut self,
        trigger: Option<&'static str>,
        f: impl Fn(&dyn ProbeServer) + Send + Sync + 'static,
    ) -> Self {
        self.trigger = trigger;
        self.during = Some(Arc::new(f));
        self
    }
    fn streaming(mut self) -> Self {
        self.streaming = true;
        self.limit = Duration::from_secs(30);
        self
    }
    fn limit(mut self, secs: u64) -> Self {
        self.limit = Duration::from_secs(secs);
        self
    }
    fn check(
        mut self,
        f: impl Fn(&dyn ProbeServer, &Output) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.check = Some(Arc::new(f));
        self
    }
    /// Checks a JSON pointer of a stored object after the step.
    fn stored(
        self,
        resource: &'static str,
        ns: Option<&'static str>,
        name: &'static str,
        ptr: &'static str,
        want: Value,
    ) -> Self {
        self.check(move |sim, _| {
            let obj = sim
                .get(resource, ns, name)
                .map_err(|e| format!("{resource} {name} not stored: {e:?}"))?;
            let got = obj.pointer(ptr).cloned().unwrap_or(Value::Null);
            if got == want {
                Ok(())
            } else {
                Err(format!("{name}{ptr} is {got}, want {want}"))
            }
        })
    }
    fn absent(self, resource: &'static str, ns: Option<&'static str>, name: &'static str) -> Self {
        self.check(move |sim, _| match sim.get(resource, ns, name) {
            Ok(_) => Err(format!("{resource} {name} is still stored")),
            Err(_) => Ok(()),
        })
    }
}

fn subst(s: &str, k: &Kube, sim: &dyn ProbeServer) -> String {
    s.replace("$DIR", &k.dir.to_string_lossy())
        .replace("$URL", &sim.url())
}

/// Runs a step, returning its output.
async fn run(step: &Step, k: &Kube, sim: &dyn ProbeServer) -> Output {
    let args: Vec<String> = step.args.iter().map(|a| subst(a, k, sim)).collect();
    if let Some(f) = &step.before {
        f(sim);
    }
    if step.during.is_none() && !step.streaming {
        let mut cmd_env = Vec::new();
        for (key, v) in &step.env {
            cmd_env.push((key.clone(), subst(v, k, sim)));
        }
        if cmd_env.is_empty() {
            return k.output(&args, step.limit).await;
        }
        let mut c = k.cmd(&args);
        c.envs(cmd_env);
        return match tokio::time::timeout(step.limit, c.output()).await {
            Ok(Ok(o)) => Output {
                code: o.status.code(),
                stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            },
            Ok(Err(e)) => Output {
                code: None,
                stdout: String::new(),
                stderr: e.to_string(),
            },
            Err(_) => Output {
                code: None,
                stdout: String::new(),
                stderr: "timed out".into(),
            },
        };
    }
    // Line by line: act on the trigger, stop a stream once everything expected was seen.
    let mut c = k.cmd(&args);
    c.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = match c.spawn() {
        Ok(c) => c,
        Err(e) => {
            return Output {
                code: None,
                stdout: String::new(),
                stderr: e.to_string(),
            }
        }
    };
    let mut stderr = child.stderr.take().unwrap();
    let err_task = tokio::spawn(async move {
        let mut s = String::new();
        let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut s).await;
        s
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdout = String::new();
    let mut fired = false;
    if step.trigger.is_none() {
        if let Some(f) = &step.during {
            f(sim);
            fired = true;
        }
    }
    let deadline = tokio::time::Instant::now() + step.limit;
    let mut timed_out = false;
    loop {
        let line = match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Ok(Ok(Some(l))) => l,
            Ok(_) => break,
            Err(_) => {
                timed_out = true;
                break;
            }
        };
        stdout.push_str(&line);
        stdout.push('\n');
        if !fired && step.trigger.is_some_and(|t| line.contains(t)) {
            if let Some(f) = &step.during {
                f(sim);
            }
            fired = true;
        }
        if step.streaming && fired && step.out_has.iter().all(|s| stdout.contains(s.as_str())) {
            break;
        }
    }
    let code = if step.streaming {
        let _ = child.kill().await;
        Some(0)
    } else if timed_out {
        let _ = child.kill().await;
        None
    } else {
        tokio::time::timeout_at(deadline, child.wait())
            .await
            .ok()
            .and_then(|r| r.ok())
            .and_then(|s| s.code())
    };
    let mut stderr = tokio::time::timeout(Duration::from_secs(5), err_task)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or_default();
    if timed_out {
        stderr.push_str("\n(timed out)");
    }
    Output {
        code,
        stdout,
        stderr,
    }
}

/// Why a step's output is not what kube-apiserver would give, if it is not.
fn judge(step: &Step, out: &Output, sim: &dyn ProbeServer) -> Result<(), String> {
    match (step.ok, out.code) {
        (_, None) => return Err(format!("no exit code: {}", out.stderr.trim())),
        (true, Some(c)) if c != 0 => {
            return Err(format!("exit {c}: {}", out.stderr.trim()));
        }
        (false, Some(0)) => return Err(format!("exit 0, want a failure: {}", out.stdout.trim())),
        _ => {}
    }
    for s in &step.out_has {
        if !out.stdout.contains(s.as_str()) {
            return Err(format!(
                "stdout lacks {s:?}:\n{}\nstderr: {}",
                out.stdout.trim_end(),
                out.stderr.trim()
            ));
        }
    }
    for s in &step.out_lacks {
        if out.stdout.contains(s.as_str()) {
            return Err(format!("stdout has {s:?}:\n{}", out.stdout.trim_end()));
        }
    }
    for s in &step.err_has {
        if !out.stderr.contains(s.as_str()) {
            return Err(format!("stderr lacks {s:?}: {}", out.stderr.trim_end()));
        }
    }
    if step.out_empty && !out.stdout.trim().is_empty() {
        return Err(format!("stdout not empty:\n{}", out.stdout.trim_end()));
    }
    if let Some(f) = &step.check {
        f(sim, out)?;
    }
    Ok(())
}

const POD_YAML: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: from-file\n  labels:\n    app: file\nspec:\n  containers:\n  - name: c\n    image: busybox\n";
const BAD_NAME_YAML: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\ndata:\n  a: \"1\"\n";
const NS_YAML: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: probe\n";
const CM1_YAML: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  a: \"1\"\n";
const CM2_YAML: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  a: \"2\"\n";
const CM3_YAML: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  a: \"3\"\n  b: replaced\n";
const LIST_YAML: &str = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: li1\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: li2\n";
const GHOST_YAML: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ghost\ndata:\n  a: \"1\"\n";
const DEPLOY_YAML: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: web\n  template:\n    metadata:\n      labels:\n        app: web\n    spec:\n      containers:\n      - name: c\n        image: nginx\n";
const DEPLOY_CONFLICT_YAML: &str =
    "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n";
const D2_YAML: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d2\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: d2\n  template:\n    metadata:\n      labels:\n        app: d2\n    spec:\n      containers:\n      - name: main\n        image: nginx\n      - name: side\n        image: busybox\n";
const D2_CHANGED_YAML: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d2\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      app: d2\n  template:\n    metadata:\n      labels:\n        app: d2\n    spec:\n      containers:\n      - name: main\n        image: nginx:1.27\n      - name: side\n        image: busybox\n";
const CRD_YAML: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wg]
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - name: Size
      type: integer
      jsonPath: .spec.size
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
"#;
const WIDGET_YAML: &str =
    "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n";
const BAD_WIDGET_YAML: &str =
    "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  size: big\n";
const EDITOR_SH: &str = "#!/bin/sh\nsed -i 's/v1-edit/v2-edit/' \"$1\"\n";
const DEPLOY_EDITOR_SH: &str =
    "#!/bin/sh\nsed -i 's/image: nginx:1.27/image: nginx:1.28/' \"$1\"\n";

/// Seeds what the steps expect to find (as a cluster's users and controllers would have).
fn seed(sim: &dyn ProbeServer) {
    sim.create(
        "namespaces",
        None,
        json!({"metadata": {"name": "team"}, "status": {"phase": "Active"}}),
    )
    .unwrap();
    let pod = |name: &str, app: &str| {
        json!({"metadata": {"name": name, "labels": {"app": app, "tier": "front"}},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]},
               "status": {"phase": "Pending"}})
    };
    let web = sim
        .create("pods", Some("default"), pod("web-1", "web"))
        .unwrap();
    sim.create("pods", Some("team"), pod("db-1", "db")).unwrap();
    sim.create("pods", Some("default"), pod("doomed", "doomed"))
        .unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "settings"}, "data": {"mode": "v1-edit"}}),
    )
    .unwrap();
    for n in ["l1", "l2"] {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": n, "labels": {"probe": "yes"}}, "data": {}}),
        )
        .unwrap();
    }
    sim.create(
        "leases.coordination.k8s.io",
        Some("default"),
        json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}}),
    )
    .unwrap();
    sim.create(
        "deployments.apps",
        Some("default"),
        json!({"metadata": {"name": "smp"},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "smp"}},
                        "template": {"metadata": {"labels": {"app": "smp"}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
    .unwrap();
    let now = "2026-01-01T00:00:00Z";
    sim.create(
        "events",
        Some("default"),
        json!({"metadata": {"name": "probe-ev"},
               "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1",
                                  "uid": web["metadata"]["uid"], "apiVersion": "v1"},
               "reason": "Probed", "message": "probe event", "type": "Normal",
               "source": {"component": "probe"}, "count": 1,
               "firstTimestamp": now, "lastTimestamp": now}),
    )
    .unwrap();
}

/// What a deployment controller would have written once the rollout finished.
fn rolled_out(sim: &dyn ProbeServer) {
    // Without the deployment (an earlier step failed) the step itself reports the failure.
    let Ok(d) = sim.get("deployments.apps", Some("default"), "web") else {
        return;
    };
    let replicas = d["spec"]["replicas"].as_i64().unwrap_or(1);
    let mut d2 = d.clone();
    d2["status"] = json!({
        "observedGeneration": d["metadata"]["generation"],
        "replicas": replicas, "updatedReplicas": replicas, "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
             "message": "Deployment has minimum availability."},
            {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
             "message": "ReplicaSet \"web-1\" has successfully progressed."}
        ]
    });
    sim.update_status("deployments.apps", Some("default"), d2)
        .unwrap();
}

fn containers(sim: &dyn ProbeServer, name: &str) -> Vec<(String, String)> {
    let d = sim
        .get("deployments.apps", Some("default"), name)
        .unwrap_or_default();
    d.pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_string(),
                        c["image"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn want_containers(name: &'static str, want: &'static [(&'static str, &'static str)]) -> CheckFn {
    Arc::new(move |sim, _| {
        let got = containers(sim, name);
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        if got == want {
            Ok(())
        } else {
            Err(format!("containers of {name} are {got:?}, want {want:?}"))
        }
    })
}

/// The steps, in order (later steps see what earlier ones did).
fn steps() -> Vec<Step> {
    vec![
        // --- discovery and cluster information ---
        ok("version", "version -o json").has(&["\"serverVersion\"", "\"gitVersion\""]),
        ok("api-versions", "api-versions").has(&["\nv1\n", "apps/v1", "coordination.k8s.io/v1", "events.k8s.io/v1"]),
        ok("api-versions lists authorization.k8s.io", "api-versions").has(&["authorization.k8s.io/v1"]).area("authz"),
        ok("api-versions lists apiextensions.k8s.io", "api-versions").has(&["apiextensions.k8s.io/v1"]).area("crd"),
        ok("api-resources", "api-resources").has(&["NAME", "APIVERSION", "NAMESPACED", "KIND", "configmaps", "ConfigMap", "deployments", "apps/v1", "leases"]),
        ok("api-resources shows short names", "api-resources").has(&["po ", "cm ", "deploy ", "ns "]).area("authz"),
        ok("api-resources --namespaced=false", "api-resources --namespaced=false -o name").has(&["namespaces"]).lacks(&["pods", "configmaps"]),
        ok("api-resources --api-group=apps", "api-resources --api-group=apps -o name").has(&["deployments.apps"]).lacks(&["pods"]),
        ok("api-resources -o wide shows verbs", "api-resources -o wide").has(&["VERBS", "create,delete,deletecollection,get,list,patch,update,watch"]),
        ok("api-resources --verbs=list", "api-resources --verbs=list -o name").has(&["pods", "leases.coordination.k8s.io"]),
        ok("cluster-info", "cluster-info").has(&["Kubernetes control plane", "is running at", "$URL"]),
        ok("get --raw /version", "get --raw /version").has(&["\"gitVersion\""]),
        ok("get --raw /api", "get --raw /api").has(&["\"kind\":\"APIVersions\""]),
        ok("get --raw /apis", "get --raw /apis").has(&["\"kind\":\"APIGroupList\"", "\"name\":\"apps\""]),
        ok("get --raw /apis/apps/v1", "get --raw /apis/apps/v1").has(&["\"kind\":\"APIResourceList\"", "\"name\":\"deployments\""]),
        ok("get --raw /apis/apps", "get --raw /apis/apps").has(&["\"kind\":\"APIGroup\"", "\"preferredVersion\""]),
        ok("get --raw /openapi/v3", "get --raw /openapi/v3").has(&["\"paths\"", "api/v1"]),
        ok("get --raw an /openapi/v3 document", "get --raw /openapi/v3/apis/apps/v1").has(&["\"openapi\":\"3.0.0\"", "/apis/apps/v1/namespaces/{namespace}/deployments"]),
        ok("get --raw /openapi/v2", "get --raw /openapi/v2").has(&["\"swagger\":\"2.0\""]).area("smp"),
        ok("get --raw /healthz", "get --raw /healthz").has(&["ok"]),
        ok("get --raw /readyz", "get --raw /readyz").has(&["ok"]),
        ok("get --raw a pod list", "get --raw /api/v1/namespaces/default/pods?limit=1").has(&["\"kind\":\"PodList\"", "\"continue\""]),
        fails("get --raw a missing object", "get --raw /api/v1/namespaces/default/pods/nosuch").err(&["NotFound"]),
        // --- get, every output form ---
        ok("get pods (table)", "get pods").has(&["NAME", "READY", "STATUS", "RESTARTS", "web-1", "0/1", "Pending"]).area("crd"),
        ok("get pods -o wide", "get pods -o wide").has(&["IP", "NODE", "NOMINATED NODE", "web-1"]).area("crd"),
        ok("get pods --server-print=false", "get pods --server-print=false").has(&["NAME", "web-1"]),
        ok("get pods --no-headers", "get pods --no-headers").has(&["web-1"]).lacks(&["NAME"]),
        ok("get pod -o yaml", "get pod web-1 -o yaml").has(&["apiVersion: v1", "kind: Pod", "name: web-1", "image: busybox", "resourceVersion:"]),
        ok("get pods -o json", "get pods -o json").has(&["\"kind\": \"List\"", "\"name\": \"web-1\"", "\"kind\": \"Pod\""]),
        ok("get pod -o jsonpath", "get pod web-1 -o jsonpath='{.metadata.name} {.spec.containers[0].image}'").has(&["web-1 busybox"]),
        ok("get pods -o name", "get pods -o name").has(&["pod/web-1\n", "pod/doomed\n"]).lacks(&["db-1"]),
        ok("get pods -o custom-columns", "get pods -o custom-columns=NAME:.metadata.name,IMAGE:.spec.containers[0].image").has(&["NAME", "IMAGE", "web-1", "busybox"]),
        ok("get pods -o go-template", "get pods -o go-template='{{range .items}}{{.metadata.name}};{{end}}'").has(&["web-1;"]),
        ok("get pods --show-labels", "get pods --show-labels").has(&["LABELS", "app=web,tier=front"]),
        ok("get pods -l app=web", "get pods -l app=web -o name").has(&["pod/web-1"]).lacks(&["doomed"]),
        ok("get pods -l set-based", "get pods -A -l 'app in (web,db)' -o name").has(&["pod/web-1", "pod/db-1"]).lacks(&["doomed"]),
        ok("get pods -l that matches none", "get pods -l app=nothing").empty().err(&["No resources found in default namespace."]),
        fails("get pods -l malformed", "get pods -l 'app in web'"),
        ok("get pods --field-selector metadata.name", "get pods --field-selector metadata.name=web-1 -o name").has(&["pod/web-1"]).lacks(&["doomed"]),
        ok("get pods --field-selector status.phase", "get pods -A --field-selector status.phase=Pending -o name").has(&["pod/web-1", "pod/db-1"]),
        ok("get pods --field-selector metadata.namespace", "get pods -A --field-selector metadata.namespace=team -o name").has(&["pod/db-1"]).lacks(&["web-1"]),
        fails("get pods --field-selector unknown field", "get pods --field-selector spec.bogus=x").err(&["field label not supported: spec.bogus"]),
        ok("get pods -A", "get pods -A -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name").has(&["team", "db-1", "default", "web-1"]),
        ok("get pods -A --chunk-size=1", "get pods -A --chunk-size=1 -o name").has(&["pod/web-1", "pod/db-1", "pod/doomed"]),
        ok("get pods --sort-by", "get pods -A --sort-by=.metadata.name -o name").check(|_, o| {
            let names: Vec<&str> = o.stdout.lines().collect();
            let mut sorted = names.clone();
            sorted.sort();
            if names == sorted && names.len() == 3 { Ok(()) } else { Err(format!("not sorted: {names:?}")) }
        }),
        ok("get pods in a missing namespace", "get pods -n nosuchns").empty().err(&["No resources found in nosuchns namespace."]),
        fails("get a missing pod", "get pod nosuch").err(&["Error from server (NotFound): pods \"nosuch\" not found"]),
        ok("get two kinds at once", "get pods,configmaps -o name").has(&["pod/web-1", "configmap/settings"]),
        ok("get a fully qualified resource", "get leases.coordination.k8s.io -o name").has(&["lease.coordination.k8s.io/leader"]),
        ok("get namespaces -o name", "get namespaces -o name").has(&["namespace/default", "namespace/kube-system", "namespace/team"]),
        ok("get namespace jsonpath status", "get namespace team -o jsonpath={.status.phase}").has(&["Active"]),
        ok("get namespaces (table)", "get namespaces").has(&["NAME", "STATUS", "AGE", "Active"]).area("crd"),
        ok("get configmaps (table)", "get configmaps").has(&["DATA", "settings"]).area("crd"),
        ok("get leases (table)", "get leases").has(&["HOLDER", "leader"]).area("crd"),
        ok("get po", "get po -o name").has(&["pod/web-1"]).area("authz"),
        ok("get cm", "get cm -o name").has(&["configmap/settings"]).area("authz"),
        ok("get ns", "get ns -o name").has(&["namespace/team"]).area("authz"),
        ok("get all", "get all -o name").has(&["pod/web-1"]).area("authz"),
        ok("get -w sees a change", "get configmaps -w -o name").streaming().has(&["configmap/settings", "configmap/watched"]).during(Some("configmap/settings"), |sim| {
            sim.create("configmaps", Some("default"), json!({"metadata": {"name": "watched"}})).unwrap();
        }),
        ok("get -w --output-watch-events", "get pods -w --output-watch-events").streaming().has(&["EVENT", "ADDED", "web-1", "watched-pod"]).during(Some("web-1"), |sim| {
            sim.create("pods", Some("default"), json!({"metadata": {"name": "watched-pod"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})).unwrap();
        }),
        // --- describe ---
        ok("describe pod", "describe pod web-1").has(&["Name:", "web-1", "Namespace:", "default", "Labels:", "app=web", "Containers:", "busybox", "Events:", "Probed", "probe event"]),
        ok("describe configmap", "describe configmap settings").has(&["Name:", "settings", "Data", "mode", "v1-edit"]),
        ok("describe namespace", "describe namespace team").has(&["Name:", "team", "Status:", "Active"]),
        ok("describe lease", "describe lease leader").has(&["Name:", "leader", "Holder Identity:", "a"]),
        // --- create ---
        ok("create -f", "create -f $DIR/pod.yaml").has(&["pod/from-file created"]).stored("pods", Some("default"), "from-file", "/metadata/labels/app", json!("file")),
        fails("create -f an existing object", "create -f $DIR/pod.yaml").err(&["AlreadyExists", "pods \"from-file\" already exists"]),
        fails("create an invalid name", "create -f $DIR/bad-name.yaml").err(&["is invalid", "metadata.name: Invalid value: \"Bad_Name\""]),
        ok("create -f a namespace", "create -f $DIR/ns.yaml").has(&["namespace/probe created"]).stored("namespaces", None, "probe", "/status/phase", json!("Active")),
        ok("a created namespace has its name label", "get namespace probe -o jsonpath={.metadata.labels}").has(&["kubernetes.io/metadata.name", "probe"]),
        ok("a built-in namespace has its name label", "get namespace kube-system -o jsonpath={.metadata.labels}").has(&["kubernetes.io/metadata.name", "kube-system"]),
        ok("create --dry-run=client", "create configmap dry-client --from-literal=a=1 --dry-run=client -o name").has(&["configmap/dry-client"]).absent("configmaps", Some("default"), "dry-client"),
        ok("create -f --dry-run=server", "create -f $DIR/ghost.yaml --dry-run=server").has(&["configmap/ghost created (server dry run)"]).absent("configmaps", Some("default"), "ghost"),
        ok("run", "run web-2 --image=busybox --labels=app=two").has(&["pod/web-2 created"]).stored("pods", Some("default"), "web-2", "/spec/containers/0/image", json!("busybox")),
        ok("expose", "expose pod web-1 --port=80 --name=web").has(&["service/web exposed"]).stored("services", Some("default"), "web", "/spec/selector/app", json!("web")),
        ok("get service", "get service web -o jsonpath='{.spec.type} {.spec.ports[0].protocol} {.spec.ports[0].targetPort}'").has(&["ClusterIP TCP 80"]),
        ok("create configmap (generator)", "create configmap gen --from-literal=a=1").has(&["configmap/gen created"]).stored("configmaps", Some("default"), "gen", "/data/a", json!("1")),
        ok("create deployment (generator)", "create deployment gen --image=nginx --replicas=2").has(&["deployment.apps/gen created"]).stored("deployments.apps", Some("default"), "gen", "/spec/replicas", json!(2)),
        ok("create namespace (generator)", "create namespace gen").has(&["namespace/gen created"]).stored("namespaces", None, "gen", "/status/phase", json!("Active")),
        ok("create configmap --dry-run=server", "create configmap dry --from-literal=a=1 --dry-run=server").has(&["configmap/dry created (server dry run)"]).absent("configmaps", Some("default"), "dry"),
        ok("run --dry-run=server", "run web-3 --image=busybox --dry-run=server").has(&["pod/web-3 created (server dry run)"]).absent("pods", Some("default"), "web-3"),
        // --- apply (client side), diff, replace ---
        ok("apply creates", "apply -f $DIR/cm1.yaml").has(&["configmap/applied created"]).check(|sim, _| {
            let cm = sim.get("configmaps", Some("default"), "applied").map_err(|e| format!("{e:?}"))?;
            cm.pointer("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration").map(|_| ()).ok_or_else(|| "no last-applied-configuration".to_string())
        }),
        ok("apply unchanged", "apply -f $DIR/cm1.yaml").has(&["configmap/applied unchanged"]),
        ok("diff shows a change", "diff -f $DIR/cm1.yaml").empty(),
        fails("diff with a change exits 1", "diff -f $DIR/cm2.yaml").has(&["a: \"1\"", "a: \"2\""]).check(|_, o| if o.code == Some(1) { Ok(()) } else { Err(format!("exit {:?}, want 1", o.code)) }),
        ok("apply --dry-run=server", "apply -f $DIR/cm2.yaml --dry-run=server").has(&["configmap/applied configured (server dry run)"]).stored("configmaps", Some("default"), "applied", "/data/a", json!("1")),
        ok("apply configures a change", "apply -f $DIR/cm2.yaml").has(&["configmap/applied configured"]).stored("configmaps", Some("default"), "applied", "/data/a", json!("2")),
        ok("replace -f", "replace -f $DIR/cm3.yaml").has(&["configmap/applied replaced"]).stored("configmaps", Some("default"), "applied", "/data/b", json!("replaced")),
        ok("apply a List", "apply -f $DIR/list.yaml").has(&["configmap/li1 created", "configmap/li2 created"]).area("smp"),
        fails("replace a missing object", "replace -f $DIR/ghost.yaml").err(&["NotFound", "configmaps \"ghost\" not found"]),
        ok("apply a deployment client-side", "apply -f $DIR/d2.yaml").has(&["deployment.apps/d2 created"]),
        ok("apply a deployment change client-side", "apply -f $DIR/d2-changed.yaml").has(&["deployment.apps/d2 configured"]).area("smp").check({
            let f = want_containers("d2", &[("main", "nginx:1.27"), ("side", "busybox")]);
            move |sim, o| f(sim, o)
        }),
        // --- server-side apply ---
        ok("apply --server-side", "apply --server-side -f $DIR/deploy.yaml").has(&["deployment.apps/web serverside-applied"]).stored("deployments.apps", Some("default"), "web", "/metadata/managedFields/0/manager", json!("kubectl")),
        ok("apply --server-side again", "apply --server-side -f $DIR/deploy.yaml").has(&["deployment.apps/web serverside-applied"]),
        fails("apply --server-side conflict", "apply --server-side --field-manager=other -f $DIR/deploy-conflict.yaml").err(&["Apply failed with 1 conflict", "conflict with \"kubectl\"", ".spec.replicas"]),
        ok("apply --server-side --force-conflicts", "apply --server-side --field-manager=other --force-conflicts -f $DIR/deploy-conflict.yaml").has(&["deployment.apps/web serverside-applied"]).stored("deployments.apps", Some("default"), "web", "/spec/replicas", json!(2)),
        ok("apply --server-side --dry-run=server", "apply --server-side -f $DIR/d2.yaml --dry-run=server").has(&["deployment.apps/d2 serverside-applied (server dry run)"]),
        // --- patch ---
        ok("patch --type merge", "patch configmap settings --type merge -p '{\"data\":{\"k\":\"v\"}}'").has(&["configmap/settings patched"]).stored("configmaps", Some("default"), "settings", "/data/k", json!("v")),
        ok("patch (strategic) a map", "patch configmap settings -p '{\"data\":{\"k2\":\"v2\"}}'").has(&["configmap/settings patched"]).stored("configmaps", Some("default"), "settings", "/data/k2", json!("v2")),
        ok("patch --type json", "patch pod web-1 --type json -p '[{\"op\":\"add\",\"path\":\"/metadata/labels/patched\",\"value\":\"yes\"}]'").has(&["pod/web-1 patched"]).stored("pods", Some("default"), "web-1", "/metadata/labels/patched", json!("yes")),
        ok("patch --type strategic adds a container", "patch deployment smp --type strategic -p '{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"side\",\"image\":\"busybox\"}]}}}}'").has(&["deployment.apps/smp patched"]).area("smp").check({
            let f = want_containers("smp", &[("side", "busybox"), ("c", "nginx")]);
            move |sim, o| f(sim, o)
        }),
        ok("patch --type strategic $patch: delete", "patch deployment smp --type strategic -p '{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"side\",\"$patch\":\"delete\"}]}}}}'").has(&["deployment.apps/smp patched"]).area("smp").check({
            let f = want_containers("smp", &[("c", "nginx")]);
            move |sim, o| f(sim, o)
        }),
        fails("patch --type json failing test", "patch configmap settings --type json -p '[{\"op\":\"test\",\"path\":\"/data/k\",\"value\":\"nope\"}]'").err(&["The request is invalid: the server rejected our request due to an error in our request"]).area("authz"),
        fails("patch a missing object", "patch configmap nosuch --type merge -p '{\"data\":{}}'").err(&["NotFound", "configmaps \"nosuch\" not found"]),
        ok("patch --dry-run=server", "patch configmap settings --type merge -p '{\"data\":{\"dry\":\"x\"}}' --dry-run=server").has(&["configmap/settings patched"]).stored("configmaps", Some("default"), "settings", "/data/dry", Value::Null),
        ok("patch --subresource=scale", "patch deployment web --subresource=scale --type merge -p '{\"spec\":{\"replicas\":2}}'").has(&["scale.autoscaling/web patched"]).stored("deployments.apps", Some("default"), "web", "/spec/replicas", json!(2)),
        ok("patch --subresource=status", "patch pod web-1 --subresource=status --type merge -p '{\"status\":{\"message\":\"probed\"}}'").has(&["pod/web-1 patched"]).stored("pods", Some("default"), "web-1", "/status/message", json!("probed")),
        // --- edit ---
        ok("get --subresource=status", "get pod web-1 --subresource=status -o jsonpath={.status.message}").has(&["probed"]),
        ok("get --subresource=scale", "get deployment web --subresource=scale -o jsonpath='{.kind} {.spec.replicas}'").has(&["Scale 2"]),
        ok("edit via KUBE_EDITOR", "edit configmap settings").env("KUBE_EDITOR", "$DIR/editor.sh").has(&["configmap/settings edited"]).stored("configmaps", Some("default"), "settings", "/data/mode", json!("v2-edit")),
        ok("edit with no change", "edit configmap settings").env("KUBE_EDITOR", "true").err(&["Edit cancelled, no changes made."]),
        // --- label, annotate ---
        ok("label", "label pod web-1 env=prod").has(&["pod/web-1 labeled"]).stored("pods", Some("default"), "web-1", "/metadata/labels/env", json!("prod")),
        fails("label without --overwrite", "label pod web-1 env=dev").err(&["'env' already has a value (prod), and --overwrite is false"]),
        ok("label --overwrite", "label pod web-1 env=dev --overwrite").has(&["pod/web-1 labeled"]).stored("pods", Some("default"), "web-1", "/metadata/labels/env", json!("dev")),
        ok("label remove", "label pod web-1 env-").has(&["pod/web-1 unlabeled"]).stored("pods", Some("default"), "web-1", "/metadata/labels/env", Value::Null),
        ok("label -l", "label configmaps -l probe=yes batch=one").has(&["configmap/l1 labeled", "configmap/l2 labeled"]),
        ok("annotate", "annotate pod web-1 note=hello").has(&["pod/web-1 annotated"]).stored("pods", Some("default"), "web-1", "/metadata/annotations/note", json!("hello")),
        ok("annotate remove", "annotate pod web-1 note-").has(&["pod/web-1 annotated"]).stored("pods", Some("default"), "web-1", "/metadata/annotations/note", Value::Null),
        // --- scale, set image, rollout, wait ---
        ok("scale", "scale deployment web --replicas=3").has(&["deployment.apps/web scaled"]).stored("deployments.apps", Some("default"), "web", "/spec/replicas", json!(3)),
        fails("scale with a wrong --current-replicas", "scale deployment web --current-replicas=1 --replicas=4").err(&["Expected replicas to be 1, was 3"]),
        ok("set image", "set image deployment/web c=nginx:1.27").has(&["deployment.apps/web image updated"]).check({
            let f = want_containers("web", &[("c", "nginx:1.27")]);
            move |sim, o| f(sim, o)
        }),
        ok("edit a deployment", "edit deployment web").env("KUBE_EDITOR", "$DIR/deploy-editor.sh").has(&["deployment.apps/web edited"]).check({
            let f = want_containers("web", &[("c", "nginx:1.28")]);
            move |sim, o| f(sim, o)
        }),
        ok("set env keeps the image", "set env deployment/web MODE=probe").has(&["deployment.apps/web env updated"]).area("smp").check({
            let f = want_containers("web", &[("c", "nginx:1.28")]);
            move |sim, o| f(sim, o)
        }),
        ok("rollout status", "rollout status deployment/web --timeout=20s").before(rolled_out).has(&["deployment \"web\" successfully rolled out"]),
        ok("describe deployment", "describe deployment web").has(&["Name:", "web", "Selector:", "app=web", "Replicas:", "StrategyType:", "RollingUpdate", "RollingUpdateStrategy:", "25% max unavailable, 25% max surge", "Pod Template:", "Conditions:", "Available"]),
        ok("rollout restart", "rollout restart deployment/web").has(&["deployment.apps/web restarted"]).check(|sim, _| {
            let d = sim.get("deployments.apps", Some("default"), "web").map_err(|e| format!("{e:?}"))?;
            d.pointer("/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt").map(|_| ()).ok_or_else(|| "no restartedAt annotation".to_string())
        }),
        ok("rollout pause", "rollout pause deployment/web").has(&["deployment.apps/web paused"]).stored("deployments.apps", Some("default"), "web", "/spec/paused", json!(true)),
        ok("rollout resume", "rollout resume deployment/web").has(&["deployment.apps/web resumed"]),
        ok("wait --for=condition", "wait --for=condition=Available deployment/web --timeout=20s").before(rolled_out).has(&["deployment.apps/web condition met"]),
        ok("wait --for=jsonpath", "wait --for=jsonpath={.spec.replicas}=3 deployment/web --timeout=20s").has(&["deployment.apps/web condition met"]),
        fails("wait times out", "wait --for=condition=Ready pod/web-1 --timeout=1s").err(&["timed out waiting for the condition on pods/web-1"]),
        ok("wait --for=create", "wait --for=create pod/later --timeout=30s").since(31).has(&["pod/later condition met"]).during(None, |sim| {
            sim.create("pods", Some("default"), json!({"metadata": {"name": "later"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})).unwrap();
        }),
        ok("wait --for=delete", "wait --for=delete pod/doomed --timeout=30s").during(None, |sim| {
            sim.delete("pods", Some("default"), "doomed").unwrap();
        }),
        // --- events ---
        ok("events", "events").since(26).has(&["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", "Probed", "Pod/web-1", "probe event"]),
        ok("events --for", "events --for pod/web-1").has(&["Probed", "probe event"]),
        ok("get events -o name", "get events -o name").has(&["event/probe-ev"]),
        ok("get events (table)", "get events").has(&["LAST SEEN", "REASON", "OBJECT", "MESSAGE", "probe event"]).area("crd"),
        ok("get events.events.k8s.io sees core events", "get events.events.k8s.io -o name").has(&["event.events.k8s.io/probe-ev"]).area("authz"),
        // --- explain ---
        ok("explain pods", "explain pods").has(&["KIND:", "Pod", "VERSION:", "v1", "spec"]).area("smp"),
        ok("explain a field", "explain deployment.spec.replicas").has(&["replicas", "<integer>"]).area("smp"),
        // --- auth ---
        ok("auth can-i", "auth can-i create pods").has(&["yes"]).area("authz"),
        ok("auth whoami", "auth whoami").since(28).has(&["Username"]).area("authz"),
        // --- custom resources ---
        ok("apply a CRD", "apply -f $DIR/crd.yaml").has(&["customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"]).area("crd"),
        ok("wait for the CRD", "wait --for=condition=Established crd/widgets.example.com --timeout=20s").has(&["condition met"]).area("crd"),
        ok("create a custom object", "create -f $DIR/widget.yaml").has(&["widget.example.com/w1 created"]).area("crd"),
        fails("schema rejects a custom object", "create -f $DIR/bad-widget.yaml").err(&["is invalid"]).area("crd"),
        ok("get custom objects (printer columns)", "get widgets").has(&["NAME", "SIZE", "w1", "3"]).area("crd"),
        ok("get a custom object by short name", "get wg w1 -o jsonpath={.spec.size}").has(&["3"]).area("crd"),
        ok("delete a custom object", "delete widget w1").has(&["widget.example.com \"w1\" deleted"]).area("crd"),
        ok("delete the CRD", "delete crd widgets.example.com").has(&["customresourcedefinition.apiextensions.k8s.io \"widgets.example.com\" deleted"]).area("crd"),
        // --- delete ---
        ok("delete --raw answers a Status", "delete --raw /api/v1/namespaces/default/configmaps/raw-del").before(|sim| {
            sim.create("configmaps", Some("default"), json!({"metadata": {"name": "raw-del"}})).unwrap();
        }).has(&["\"kind\":\"Status\"", "\"status\":\"Success\""]).area("authz"),
        ok("delete by name", "delete pod from-file").has(&["pod \"from-file\" deleted"]).absent("pods", Some("default"), "from-file"),
        ok("delete -l", "delete configmaps -l probe=yes").has(&["configmap \"l1\" deleted", "configmap \"l2\" deleted"]).absent("configmaps", Some("default"), "l1"),
        ok("delete --dry-run=server", "delete configmap settings --dry-run=server").has(&["configmap \"settings\" deleted (server dry run)"]).stored("configmaps", Some("default"), "settings", "/metadata/name", json!("settings")),
        ok("delete --grace-period=0 --force", "delete pod web-2 --grace-period=0 --force").has(&["pod \"web-2\" force deleted"]).err(&["Immediate deletion does not wait for confirmation"]).absent("pods", Some("default"), "web-2"),
        ok("delete --cascade=orphan", "delete deployment d2 --cascade=orphan").has(&["deployment.apps \"d2\" deleted"]).absent("deployments.apps", Some("default"), "d2"),
        ok("delete -f", "delete -f $DIR/cm1.yaml").has(&["configmap \"applied\" deleted"]).absent("configmaps", Some("default"), "applied"),
        fails("delete a missing object", "delete pod nosuch").err(&["Error from server (NotFound): pods \"nosuch\" not found"]),
        ok("delete --ignore-not-found", "delete pod nosuch --ignore-not-found").empty(),
        ok("delete --all", "delete leases --all").has(&["lease.coordination.k8s.io \"leader\" deleted"]).absent("leases.coordination.k8s.io", Some("default"), "leader"),
        ok("delete a namespace", "delete namespace probe").has(&["namespace \"probe\" deleted"]),
    ]
}

/// Features the simulator does not serve, each with why; run and reported, never required.
fn not_served() -> Vec<(Step, &'static str)> {
    let no_kubelet =
        "no kubelet: pods never run, so there is no log, exec, attach or port-forward stream";
    vec![
        (fails("logs", "logs web-1"), no_kubelet),
        (fails("exec", "exec web-1 -- true"), no_kubelet),
        (fails("attach", "attach web-1"), no_kubelet),
        (
            fails("port-forward", "port-forward pod/web-1 18080:80").limit(15),
            no_kubelet,
        ),
        (
            fails("cp", "cp web-1:/etc/hostname $DIR/hostname"),
            "cp runs tar through exec; no kubelet",
        ),
        (
            fails("debug", "debug web-1 --image=busybox -- true").limit(15),
            "pods/ephemeralcontainers is not served: no kubelet",
        ),
        (
            fails("cordon", "cordon node-1"),
            "nodes are not served: no kubelet registers one",
        ),
        (
            fails("top pods", "top pods"),
            "metrics.k8s.io is not served (no metrics-server)",
        ),
        (
            fails("rollout history", "rollout history deployment/web"),
            "ReplicaSets are not served: no controllers run",
        ),
    ]
}

/// Steps whose kubectl command waits on a controller that a bare kube-apiserver does not run:
/// run and reported on the real server, never required there (they are on the simulator).
fn differs_on_real() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "delete --cascade=orphan",
            "kubectl waits until the deployment is gone, and its `orphan` finalizer is removed by \
             the garbage collector of kube-controller-manager, which does not run here",
        ),
        (
            "delete a namespace",
            "kubectl waits until the namespace is gone, and the namespace controller of \
             kube-controller-manager, which does not run here, empties and removes it",
        ),
    ]
}

/// A failed step: its name, its area, why.
type Failed = (String, Option<&'static str>, String);

/// Writes the files the steps read, seeds `server` and runs every step against it in order,
/// printing a PASS/FAIL line each; the steps `reported` names run and are printed, never failed.
/// Answers how many steps ran and which failed.
async fn probe(
    server: &dyn ProbeServer,
    k: &Kube,
    minor: u32,
    reported: &[(&str, &str)],
) -> (usize, Vec<Failed>) {
    for (name, text) in [
        ("pod.yaml", POD_YAML),
        ("bad-name.yaml", BAD_NAME_YAML),
        ("ns.yaml", NS_YAML),
        ("cm1.yaml", CM1_YAML),
        ("cm2.yaml", CM2_YAML),
        ("cm3.yaml", CM3_YAML),
        ("ghost.yaml", GHOST_YAML),
        ("list.yaml", LIST_YAML),
        ("deploy.yaml", DEPLOY_YAML),
        ("deploy-conflict.yaml", DEPLOY_CONFLICT_YAML),
        ("d2.yaml", D2_YAML),
        ("d2-changed.yaml", D2_CHANGED_YAML),
        ("crd.yaml", CRD_YAML),
        ("widget.yaml", WIDGET_YAML),
        ("bad-widget.yaml", BAD_WIDGET_YAML),
        ("editor.sh", EDITOR_SH),
        ("deploy-editor.sh", DEPLOY_EDITOR_SH),
    ] {
        k.file(name, text);
    }
    for script in ["editor.sh", "deploy-editor.sh"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(k.dir.join(script), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    seed(server);

    let mut failed: Vec<Failed> = Vec::new();
    let mut total = 0;
    for step in steps() {
        if minor != 0 && minor < step.since {
            println!(
                "SKIP {:<48} (kubectl 1.{minor} has no such command)",
                step.name
            );
            continue;
        }
        let mut step = step;
        step.out_has = step.out_has.iter().map(|e| subst(e, k, server)).collect();
        let reported_why = reported
            .iter()
            .find(|(name, _)| *name == step.name)
            .map(|(_, why)| *why);
        if reported_why.is_some() {
            // Reported only: a command that waits for what never comes need not wait long.
            step.limit = step.limit.min(Duration::from_secs(10));
        }
        let out = run(&step, k, server).await;
        let verdict = judge(&step, &out, server);
        if let Some(why) = reported_why {
            let said = match &verdict {
                Ok(()) => "passes".to_string(),
                Err(e) => format!("fails: {}", e.lines().next().unwrap_or_default()),
            };
            println!("REPORTED {} ({why}): {said}", step.name);
            continue;
        }
        total += 1;
        match verdict {
            Ok(()) => println!("PASS {}", step.name),
            Err(why) => {
                let tag = step.area.map(|a| format!(" [{a}]")).unwrap_or_default();
                println!("FAIL {}{tag}: {}", step.name, why.replace('\n', "\n     "));
                failed.push((step.name.to_string(), step.area, why));
            }
        }
    }
    println!("\nNot served (documented; run and reported, never required):");
    for (step, why) in not_served() {
        let out = run(&step, k, server).await;
        let verdict = match out.code {
            Some(c) => format!("exit {c}"),
            None => "no exit".to_string(),
        };
        println!("  {:<32} {verdict:<8} {why}", step.name);
    }
    println!(
        "  {:<32} {:<8} kubectl proxy serves until killed and works on any server; not run",
        "proxy", "-"
    );
    (total, failed)
}

/// The verdict: every required step passed.
fn require_all(server: &str, minor: u32, total: usize, failed: &[Failed]) {
    println!(
        "\n{} of {total} steps pass on {server} (kubectl 1.{minor})",
        total - failed.len()
    );
    if !failed.is_empty() {
        println!("failing steps:");
        for (name, area, _) in failed {
            println!(
                "  {name}{}",
                area.map(|a| format!(" [belongs to {a}]"))
                    .unwrap_or_default()
            );
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {total} kubectl probe steps fail on {server}",
        failed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_probe_every_step_behaves_as_against_kube_apiserver() {
    let Some(bin) = find_kubectl() else {
        println!(
            "SKIPPED: kubectl not found (run `cargo xtask ci`, which builds one, or set SIM_KUBECTL)"
        );
        return;
    };
    let sim = SimServer::start().await.unwrap();
    let k = Kube::new(bin.clone(), &sim, "probe");
    let (_, minor) = k.client_version().await;
    println!("kubectl probe with {} (1.{minor})", bin.display());
    let (total, failed) = probe(&sim, &k, minor, &[]).await;
    require_all("the simulator", minor, total, &failed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_probe_every_step_behaves_alike_on_a_real_kube_apiserver() {
    if let Some(why) = real_apiserver::unavailable() {
        println!("SKIPPED: the kubectl probe on a real kube-apiserver not run: {why}");
        return;
    }
    let Some(bin) = find_kubectl() else {
        println!(
            "SKIPPED: kubectl not found (run `cargo xtask ci`, which builds one, or set SIM_KUBECTL)"
        );
        return;
    };
    let server = tokio::task::spawn_blocking(|| RealServer::start(ServerOptions::default()))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("the real kube-apiserver did not start: {e}"));
    let port = server
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("the server's URL ends with its port");
    let kubeconfig = std::fs::read_to_string(server.kubeconfig()).unwrap();
    let k = Kube::for_server(bin.clone(), port, "probe-real", &kubeconfig);
    let (_, minor) = k.client_version().await;
    println!(
        "kubectl probe with {} (1.{minor}) on a real kube-apiserver at {}",
        bin.display(),
        server.url()
    );
    let real = Real(server);
    let (total, failed) = probe(&real, &k, minor, &differs_on_real()).await;
    let stopped = tokio::task::spawn_blocking(move || real.0.stop())
        .await
        .unwrap();
    require_all("the real kube-apiserver", minor, total, &failed);
    stopped.unwrap_or_else(|e| panic!("the real kube-apiserver did not stop cleanly: {e}"));
}
