//! One replica of a sharded widget controller, run as a process of its own
//! (`integration-suite shard-replica --url .. --identity ..`): the `sharding` scenario and the
//! sharding benchmark start several, so that each has its own identity (simulator user), client,
//! tokio runtime and clock, and can be killed (SIGKILL) or frozen (SIGSTOP) as a whole.
//!
//! ```text
//!   Ring: holds Lease widgets-<identity>             (user <identity>)
//!   Sharder candidate: metadata informers of all widgets and ConfigMaps, elected on
//!                      Lease widgets-sharder        (user sharder-<identity>)
//!   Controller: informers of widgets and ConfigMaps labelled for <identity> only
//!     reconcile(widget): wait `--delay-ms`; child ConfigMap <name>-cfg with data.size = spec.size
//!                        (created with the owner's label, fenced); status {size, by: identity}
//! ```
//!
//! It prints a status line every `--status-ms` on stdout, which the parent reads (caches are a
//! replica's own memory; everything else the parent checks from the server):
//!
//! ```text
//! STATUS widgets=742 children=741 reconciles=5120 fenced=3 members=4 lease=1
//! ```
//!
//! A line `stop` on stdin, or stdin closing (the parent died), stops it gracefully: its shard
//! Lease is released.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use controller::leader_election::{ApiLeaseLock, LeaderElectionConfig};
use controller::owners::OwnerEnqueuer;
use controller::sharding::{
    shard_selector, ApiRingLeases, FenceError, FencedWriter, Ring, ShardGate, ShardedController,
    Sharder, SharderConfig, SHARDER_RATE_LIMIT,
};
use controller::{Action, CancellationToken};
use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;
use workqueue::shared_informer::reflector::store_index::{
    DynamicObject, Object, OwnerReference, PartialObjectMetadata, ReadOnlyIndexer,
};
use workqueue::shared_informer::reflector::{
    Api, Client, ClusterConfig, Credentials, RateLimit, Resource,
};
use workqueue::shared_informer::SharedInformerFactory;
use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};

/// The ring's name (and the prefix of its Leases).
pub const RING: &str = "widgets";
/// The sharder's Lease.
pub const SHARDER_LEASE: &str = "widgets-sharder";
/// The widgets' API group.
pub const GROUP: &str = "example.com";
/// The widgets' kind.
pub const KIND: &str = "Widget";

/// The widgets resource (a CRD, see [`widget_crd`]).
pub fn widgets() -> Resource {
    Resource::namespaced(GROUP, "v1", "widgets")
}

/// The children's resource.
pub fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

/// The CRD of the widgets: `spec.size` (the desired state), `status.size` and `status.by` (the
/// replica that reconciled it last).
pub fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": KIND},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {
                        "size": {"type": "integer"}, "by": {"type": "string"}}}}}}}]}
    })
}

/// The name of a widget's child ConfigMap.
pub fn child_name(widget: &str) -> String {
    format!("{widget}-cfg")
}

/// The simulator user a replica's sharder writes as.
pub fn sharder_user(identity: &str) -> String {
    format!("sharder-{identity}")
}

/// Timings and sizes of a replica.
#[derive(Debug, Clone)]
pub struct ReplicaOpts {
    /// The simulator's URL (unused with `kubeconfig`).
    pub url: String,
    /// The token of user `identity` (controller and ring Lease).
    pub token: String,
    /// The token of user `sharder-<identity>`.
    pub sharder_token: String,
    /// Instead of `url` and the tokens: kubeconfig files (paths) for the replica's user and for
    /// its sharder's, as on a real kube-apiserver, where each is a user of its own by client
    /// certificate.
    pub kubeconfigs: Option<(String, String)>,
    /// The replica's identity.
    pub identity: String,
    /// The namespace of the widgets.
    pub namespace: String,
    /// Shard and sharder lease duration, renew deadline, retry period (ms).
    pub lease_ms: u64,
    /// See `lease_ms`.
    pub renew_ms: u64,
    /// See `lease_ms`.
    pub retry_ms: u64,
    /// Controller workers.
    pub workers: usize,
    /// Time a reconcile waits before writing (the benchmark's 20 ms).
    pub delay_ms: u64,
    /// Status line period.
    pub status_ms: u64,
    /// The client's request rate limit (requests/s, burst twice that); 0: client-go's 50/s.
    pub qps: u64,
    /// The ring and the sharder share their clients' budgets (1) instead of their own
    /// defaults (0): how they ran before they had budgets of their own.
    pub shared_budgets: u64,
    /// How the replicas split the widgets: a sharder's labels, or ranges of the server's
    /// shard hash ([`crate::shard_range_replica`]).
    pub mode: Mode,
}

/// How a fleet of replicas splits the widgets (`--mode label|range`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// An elected sharder labels each widget for its owner (`Sharder`, `ShardGate`).
    #[default]
    Label,
    /// Each replica claims virtual ranges of the server's shard hash (`RangeShard`).
    Range,
}

impl Mode {
    /// Its command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Label => "label",
            Mode::Range => "range",
        }
    }

    /// Parses `label` or `range`.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "label" => Ok(Mode::Label),
            "range" => Ok(Mode::Range),
            other => Err(format!("mode {other:?}: expected label or range")),
        }
    }
}

impl ReplicaOpts {
    /// The command-line form, parsed back by [`main`].
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec!["shard-replica".to_string()];
        for (flag, value) in [
            ("--url", self.url.clone()),
            ("--token", self.token.clone()),
            ("--sharder-token", self.sharder_token.clone()),
            ("--identity", self.identity.clone()),
            ("--namespace", self.namespace.clone()),
            ("--lease-ms", self.lease_ms.to_string()),
            ("--renew-ms", self.renew_ms.to_string()),
            ("--retry-ms", self.retry_ms.to_string()),
            ("--workers", self.workers.to_string()),
            ("--delay-ms", self.delay_ms.to_string()),
            ("--status-ms", self.status_ms.to_string()),
            ("--qps", self.qps.to_string()),
            ("--shared-budgets", self.shared_budgets.to_string()),
            ("--mode", self.mode.as_str().to_string()),
        ] {
            args.push(flag.into());
            args.push(value);
        }
        if let Some((mine, sharder)) = &self.kubeconfigs {
            args.extend([
                "--kubeconfig".into(),
                mine.clone(),
                "--sharder-kubeconfig".into(),
                sharder.clone(),
            ]);
        }
        args
    }

    fn parse(args: &[String]) -> Result<Self, String> {
        let mut opts = ReplicaOpts {
            url: String::new(),
            token: String::new(),
            sharder_token: String::new(),
            kubeconfigs: None,
            identity: String::new(),
            namespace: "default".into(),
            lease_ms: 3000,
            renew_ms: 2000,
            retry_ms: 500,
            workers: 4,
            delay_ms: 0,
            status_ms: 200,
            qps: 0,
            shared_budgets: 0,
            mode: Mode::Label,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<u64>()
                    .map_err(|e| format!("{flag} {value:?}: {e}"))
            };
            match flag.as_str() {
                "--url" => opts.url = value.clone(),
                "--token" => opts.token = value.clone(),
                "--sharder-token" => opts.sharder_token = value.clone(),
                "--kubeconfig" => {
                    let sharder = opts.kubeconfigs.take().map(|k| k.1).unwrap_or_default();
                    opts.kubeconfigs = Some((value.clone(), sharder));
                }
                "--sharder-kubeconfig" => {
                    let mine = opts.kubeconfigs.take().map(|k| k.0).unwrap_or_default();
                    opts.kubeconfigs = Some((mine, value.clone()));
                }
                "--identity" => opts.identity = value.clone(),
                "--namespace" => opts.namespace = value.clone(),
                "--lease-ms" => opts.lease_ms = number()?,
                "--renew-ms" => opts.renew_ms = number()?,
                "--retry-ms" => opts.retry_ms = number()?,
                "--workers" => opts.workers = number()? as usize,
                "--delay-ms" => opts.delay_ms = number()?,
                "--status-ms" => opts.status_ms = number()?.max(10),
                "--qps" => opts.qps = number()?,
                "--shared-budgets" => opts.shared_budgets = number()?,
                "--mode" => opts.mode = Mode::parse(value)?,
                other => return Err(format!("unknown flag {other:?}")),
            }
        }
        match &opts.kubeconfigs {
            Some((mine, sharder)) if mine.is_empty() || sharder.is_empty() => {
                return Err("--kubeconfig and --sharder-kubeconfig go together".into())
            }
            None if opts.url.is_empty() => return Err("--url or --kubeconfig is required".into()),
            _ => {}
        }
        if opts.identity.is_empty() {
            return Err("--identity is required".into());
        }
        Ok(opts)
    }

    /// The election timings of Lease `name`.
    pub fn election(&self, name: &str) -> LeaderElectionConfig {
        let mut config = LeaderElectionConfig::new(name, self.identity.clone());
        config.lease_duration = Duration::from_millis(self.lease_ms);
        config.renew_deadline = Duration::from_millis(self.renew_ms);
        config.retry_period = Duration::from_millis(self.retry_ms);
        config
    }
}

/// What a replica reports in its status lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// Widgets in its controller's cache (in range mode: widgets and children).
    pub widgets: u64,
    /// ConfigMaps in its controller's cache.
    pub children: u64,
    /// Reconciles run (gate admitted, reconcile function called).
    pub reconciles: u64,
    /// Writes the server refused with 409 (the fence holding, or an ordinary conflict).
    pub fenced: u64,
    /// Live members it sees.
    pub members: u64,
    /// Whether its shard lease guard is valid.
    pub lease: bool,
    /// Range mode: the ranges it publishes as held.
    pub held: u64,
    /// Range mode: the ranges it acts on.
    pub acting: u64,
}

impl ReplicaStatus {
    /// Parses a `STATUS ...` line.
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("STATUS ")?;
        let mut status = ReplicaStatus::default();
        for field in rest.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            match key {
                "widgets" => status.widgets = value,
                "children" => status.children = value,
                "reconciles" => status.reconciles = value,
                "fenced" => status.fenced = value,
                "members" => status.members = value,
                "lease" => status.lease = value != 0,
                "held" => status.held = value,
                "acting" => status.acting = value,
                _ => {}
            }
        }
        Some(status)
    }
}

#[derive(Default)]
struct Counts {
    reconciles: AtomicU64,
    fenced: AtomicU64,
}

/// The `shard-replica` subcommand: `args` are the flags after it.
pub fn main(args: &[String]) -> ExitCode {
    let opts = match ReplicaOpts::parse(args) {
        Ok(opts) => opts,
        Err(message) => {
            eprintln!("shard-replica: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shard-replica: cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let replica = async move {
        match opts.mode {
            Mode::Label => run(opts).await,
            Mode::Range => crate::shard_range_replica::run(opts).await,
        }
    };
    match runtime.block_on(replica) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("shard-replica: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A client of `url` authenticated by `token`, at `qps` requests/s (0: the default limit): a
/// test's stand-in for a replica's.
#[cfg(test)]
pub fn client(url: &str, token: &str, qps: u64) -> Result<Client, String> {
    let mut config = ClusterConfig::new(url).map_err(|e| e.to_string())?;
    config.credentials = Credentials::Token(token.into());
    client_for(config, qps)
}

/// The `User-Agent` of a client writing as `manager`: client-go's shape with `manager` as the
/// program, so that a kube-apiserver, which names the field manager of a write without a
/// `fieldManager` after the agent's first word, records `manager` in `managedFields`.
pub fn user_agent(manager: &str) -> String {
    let default = workqueue::shared_informer::reflector::default_user_agent();
    match default.split_once('/') {
        Some((_, rest)) => format!("{manager}/{rest}"),
        None => manager.to_string(),
    }
}

/// The client of the replica (`sharder` false) or of its sharder: from its kubeconfig, or of
/// `url` with its token; named in its User-Agent after its user (`identity` or
/// `sharder-<identity>`).
pub fn replica_client(opts: &ReplicaOpts, sharder: bool) -> Result<Client, String> {
    let mut config = match (&opts.kubeconfigs, sharder) {
        (Some((path, _)), false) | (Some((_, path)), true) => {
            ClusterConfig::from_kubeconfig_files(&[path.into()], None)
                .map_err(|e| format!("the kubeconfig {path}: {e}"))?
        }
        (None, _) => {
            let mut config = ClusterConfig::new(&opts.url).map_err(|e| e.to_string())?;
            let token = if sharder {
                &opts.sharder_token
            } else {
                &opts.token
            };
            config.credentials = Credentials::Token(token.as_str().into());
            config
        }
    };
    config.user_agent = user_agent(&if sharder {
        sharder_user(&opts.identity)
    } else {
        opts.identity.clone()
    });
    client_for(config, opts.qps)
}

fn client_for(mut config: ClusterConfig, qps: u64) -> Result<Client, String> {
    if qps > 0 {
        config.rate_limit = Some(RateLimit::new(
            qps as f64,
            (2 * qps).min(u64::from(u32::MAX)) as u32,
        ));
    }
    Client::new(&config).map_err(|e| e.to_string())
}

async fn run(opts: ReplicaOpts) -> Result<(), String> {
    let stop = CancellationToken::new();
    let identity = opts.identity.clone();
    let ns = opts.namespace.clone();
    // Each client names its writer in its User-Agent: the field manager a real server records
    // in `managedFields`, which is how the `sharding` scenario tells there who wrote a version.
    let client = replica_client(&opts, false)?;
    let sharder_client = replica_client(&opts, true)?;
    let counts = Arc::new(Counts::default());
    let mut tasks = Vec::new();

    // Membership.
    let leases = if opts.shared_budgets > 0 {
        ApiRingLeases::with_budget(client.clone(), &ns)
    } else {
        ApiRingLeases::new(client.clone(), &ns)
    };
    let ring = Ring::new(RING, opts.election(RING), leases.clone()).map_err(|e| e.to_string())?;
    tasks.push(tokio::spawn({
        let (ring, stop) = (ring.clone(), stop.clone());
        async move {
            if let Err(error) = ring.run(ring.lock(), stop).await {
                tracing::error!(%error, "the replica cannot join its ring");
            }
        }
    }));

    // The sharder candidate: metadata-only caches of every widget and ConfigMap.
    let meta = SharedInformerFactory::with_client(sharder_client.clone()).namespace(&ns);
    let all_widgets = meta
        .metadata_informer(widgets())
        .map_err(|e| e.to_string())?;
    let all_children = meta
        .metadata_informer(configmaps())
        .map_err(|e| e.to_string())?;
    let mut sharder_config = SharderConfig::default();
    sharder_config.workers = 8;
    if opts.shared_budgets > 0 {
        sharder_config.rate_limit = None;
    } else if (opts.qps as f64) > SHARDER_RATE_LIMIT.qps {
        // A replica given more than the sharder's default budget (the scenario's 2,000
        // requests/s against a simulator) gives its sharder as much: the default is for real
        // clusters, and the scenario's bounds are for the replica's own rate.
        sharder_config.rate_limit = Some(RateLimit::new(
            opts.qps as f64,
            (2 * opts.qps).min(u64::from(u32::MAX)) as u32,
        ));
    }
    let sharder: Sharder<PartialObjectMetadata, _> = Sharder::new(
        ring.clone(),
        sharder_client.clone(),
        widgets(),
        KIND,
        &all_widgets,
        sharder_config,
    )
    .map_err(|e| e.to_string())?
    .with_children(configmaps(), &all_children)
    .map_err(|e| e.to_string())?;
    meta.start(&stop);
    tasks.push(tokio::spawn({
        let lock = ApiLeaseLock::new(sharder_client, &ns, SHARDER_LEASE, identity.clone());
        let (stop, config) = (stop.clone(), opts.election(SHARDER_LEASE));
        async move { sharder.run_elected(config, lock, stop).await }
    }));

    // The controller: its share of widgets, and the children carrying its label.
    let mine = SharedInformerFactory::with_client(client.clone())
        .namespace(&ns)
        .label_selector(
            shard_selector(RING, &identity)
                .parse()
                .map_err(|e| format!("{e:?}"))?,
        );
    let my_widgets = mine
        .informer::<DynamicObject>(widgets())
        .map_err(|e| e.to_string())?;
    let my_children = mine
        .informer::<DynamicObject>(configmaps())
        .map_err(|e| e.to_string())?;
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    my_widgets
        .add_event_handler(KeyEnqueuer::<DynamicObject, _>::new(queue.clone()))
        .map_err(|e| e.to_string())?;
    my_children
        .add_event_handler(OwnerEnqueuer::<DynamicObject, _>::new(
            queue.clone(),
            GROUP,
            KIND,
        ))
        .map_err(|e| e.to_string())?;
    mine.start(&stop);
    let widget_api = Api::namespaced_with(client.clone(), widgets(), &ns);
    let child_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), configmaps(), &ns);
    let gate = ShardGate::for_ring(widget_api, &ring, my_widgets.indexer().clone());
    let child_writer = FencedWriter::for_ring(child_api.clone(), &ring);
    let reconciler = Arc::new(Reconciler {
        identity: identity.clone(),
        delay: Duration::from_millis(opts.delay_ms),
        children: my_children.indexer().clone(),
        child_api,
        child_writer,
        counts: counts.clone(),
    });
    tasks.push(tokio::spawn({
        let stop = stop.clone();
        let workers = opts.workers.max(1);
        async move {
            ShardedController::new(gate, queue)
                .workers(workers)
                .run(stop, move |widget, writer| {
                    let reconciler = reconciler.clone();
                    async move { reconciler.reconcile(widget, writer).await }
                })
                .await
        }
    }));

    // Status lines, until told to stop.
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut tick = tokio::time::interval(Duration::from_millis(opts.status_ms));
    let (widgets_cache, children_cache) =
        (my_widgets.indexer().clone(), my_children.indexer().clone());
    loop {
        tokio::select! {
            line = stdin.next_line() => match line {
                Ok(Some(line)) if line.trim() != "stop" => continue,
                _ => break,
            },
            _ = tick.tick() => {
                println!(
                    "STATUS widgets={} children={} reconciles={} fenced={} members={} lease={}",
                    widgets_cache.len(),
                    children_cache.len(),
                    counts.reconciles.load(Ordering::Relaxed),
                    counts.fenced.load(Ordering::Relaxed),
                    ring.members().len(),
                    u8::from(ring.guard().is_valid()),
                );
            }
        }
    }
    stop.cancel();
    for task in tasks {
        let _ = task.await;
    }
    mine.shutdown().await;
    meta.shutdown().await;
    Ok(())
}

struct Reconciler {
    identity: String,
    delay: Duration,
    children: ReadOnlyIndexer<DynamicObject>,
    child_api: Api<DynamicObject>,
    child_writer: FencedWriter<DynamicObject>,
    counts: Arc<Counts>,
}

/// A widget's `spec.size`.
pub fn spec_size(widget: &serde_json::Map<String, Value>) -> i64 {
    widget
        .get("spec")
        .and_then(|s| s.get("size"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

impl Reconciler {
    fn counted(&self, error: FenceError) -> FenceError {
        if matches!(error, FenceError::Fenced(_)) {
            self.counts.fenced.fetch_add(1, Ordering::Relaxed);
        }
        error
    }

    async fn reconcile(
        &self,
        widget: Arc<DynamicObject>,
        writer: FencedWriter<DynamicObject>,
    ) -> Result<Action, FenceError> {
        self.counts.reconciles.fetch_add(1, Ordering::Relaxed);
        if !self.delay.is_zero() {
            // The benchmark's stand-in for a reconcile's own work (an external call).
            tokio::time::sleep(self.delay).await;
        }
        let size = spec_size(&widget.data);
        let name = widget.name().to_string();
        let ns = widget.namespace().unwrap_or_default().to_string();
        let child_key = format!("{ns}/{}", child_name(&name));
        match self.children.get_by_key(&child_key) {
            None => {
                let Some(uid) = widget.uid() else {
                    return Ok(Action::Done);
                };
                let mut child = DynamicObject::new("v1", "ConfigMap")
                    .within(&ns)
                    .named(child_name(&name));
                child.metadata.owner_references = Some(vec![OwnerReference {
                    api_version: format!("{GROUP}/v1"),
                    kind: KIND.into(),
                    name: name.clone(),
                    uid: uid.to_string(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]);
                child
                    .data
                    .insert("data".into(), json!({"size": size.to_string()}));
                match writer.create_child(&self.child_api, &widget, &child).await {
                    Ok(_) => {}
                    // It exists but is not (yet) labelled ours (a late create of the previous
                    // owner): the sharder makes it follow its owner; try again then.
                    Err(FenceError::ChildExists { .. }) => {
                        return Ok(Action::RequeueAfter(Duration::from_millis(200)))
                    }
                    Err(e) => return Err(self.counted(e)),
                }
            }
            Some(child) => {
                let current = child
                    .data
                    .get("data")
                    .and_then(|d| d.get("size"))
                    .and_then(Value::as_str);
                if current != Some(size.to_string().as_str()) {
                    self.child_writer
                        .merge_patch(&child, &json!({"data": {"size": size.to_string()}}))
                        .await
                        .map_err(|e| self.counted(e))?;
                }
            }
        }
        let status = widget.data.get("status");
        let done = status.and_then(|s| s.get("size")).and_then(Value::as_i64) == Some(size)
            && status.and_then(|s| s.get("by")).and_then(Value::as_str)
                == Some(self.identity.as_str());
        if !done {
            writer
                .merge_patch(
                    &widget,
                    &json!({"status": {"size": size, "by": self.identity}}),
                )
                .await
                .map_err(|e| self.counted(e))?;
        }
        Ok(Action::Done)
    }
}
