//! The scenarios, in the order they run (see [`all`]).

mod builder;
mod churn;
mod compaction;
mod controller;
mod crd;
mod handlers;
mod hostile;
mod leader;
mod leader_processes;
mod modes;
mod portable;
mod protobuf;
mod resync;
mod selectors;
mod shard_ranges;
mod sharding;
mod sharing;
mod soak;
mod transports;
mod writes;

use std::time::Duration;

use futures::FutureExt;

use crate::{Opts, Scenario};

fn secs(n: u64) -> fn(&Opts) -> Duration {
    // A function pointer per limit keeps `Scenario` plain data.
    match n {
        120 => |_| Duration::from_secs(120),
        180 => |_| Duration::from_secs(180),
        _ => |_| Duration::from_secs(240),
    }
}

/// One scenario per hostile case (`hostile-*`), in [`hostile::CASES`] order.
macro_rules! hostile_scenarios {
    ($($i:literal)*) => {
        [$(Scenario {
            name: hostile::CASES[$i].name,
            about: hostile::CASES[$i].about,
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| hostile::run(o, &hostile::CASES[$i]).boxed(),
        }),*]
    };
}

/// Every scenario.
pub fn all() -> Vec<Scenario> {
    let mut all = vec![
        Scenario {
            name: "churn-10k-list",
            about: "10k-object initial list, then 1k events/s for 30 s",
            timeout: secs(180),
            informers: true,
            portable: false,
            run: |o| churn::big_list_then_churn(o).boxed(),
        },
        Scenario {
            name: "watch-faults",
            about: "churn with cut watches, 1-byte chunks, resets, bad lines, ERROR events, stalls, compaction, refused requests; list and watch-list mode",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| churn::watch_faults(o).boxed(),
        },
        Scenario {
            name: "compaction-relist",
            about: "compaction during a disconnect: 410, relist, deletions as tombstones exactly once",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| compaction::compaction_relist(o).boxed(),
        },
        Scenario {
            name: "bookmarks-watch-list",
            about: "bookmarks on/off × watch-list mode on/off under churn",
            timeout: secs(180),
            informers: true,
            portable: false,
            run: |o| modes::bookmarks_and_watch_list(o).boxed(),
        },
        Scenario {
            name: "protobuf",
            about: "typed Pb<Pod>, PbView<Pod> and CompactObject informers and a controller on protobuf: cut watches, split frames, 410; then the three, and a typed write, on a server answering JSON",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| protobuf::protobuf_end_to_end(o).boxed(),
        },
        Scenario {
            name: "transports",
            about: "HTTPS + bearer token (HTTP/1.1), HTTPS + client certificate (h2), h2c",
            timeout: secs(180),
            informers: true,
            portable: false,
            run: |o| transports::transports(o).boxed(),
        },
        Scenario {
            name: "five-consumers",
            about: "five consumers of one factory: one list and one watch per resource",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| sharing::five_consumers(o).boxed(),
        },
        Scenario {
            name: "slow-panicking-handlers",
            about: "a slow and a panicking handler beside healthy ones",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| handlers::slow_and_panicking(o).boxed(),
        },
        Scenario {
            name: "controller-retries",
            about: "workqueue controller with injected panics, errors and retries under churn",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| controller::controller_retries(o).boxed(),
        },
        Scenario {
            name: "controller-writes",
            about: "a controller reconciles widgets into child ConfigMaps and status through Api<K>, under churn and injected conflicts",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| writes::controller_writes(o).boxed(),
        },
        Scenario {
            name: "leader-election",
            about: "three replicas on a Lease: the leader cancelled, partitioned, slowed, frozen past its lease; no write by a non-holder",
            timeout: secs(120),
            // Replicas, a Lease and writes: no informer, so no queue to vary.
            informers: false,
            // On a real server without the partition and the slowing (see the module doc).
            portable: true,
            run: |o| leader::leader_election(o).boxed(),
        },
        Scenario {
            name: "leader-election-processes",
            about: "three replica processes on a Lease: the leader killed, the next frozen past its lease; no write by a non-holder",
            timeout: secs(120),
            // Replica processes, a Lease and writes: no informer, so no queue to vary.
            informers: false,
            // Signals only, no fault of the simulator's: the same on a real server.
            portable: true,
            run: |o| leader_processes::leader_election_processes(o).boxed(),
        },
        Scenario {
            name: "sharding",
            about: "3,000 widgets and children reconciled by replica processes of a sharded controller, ring 1 → 3 → 2 → 4, one killed, one frozen past its lease, one partitioned; checked from the write log (on a real server: 400 widgets, no partition, checked from a watch's record of every version)",
            timeout: |o| match o.server {
                crate::backend::ServerKind::Sim => Duration::from_secs(240),
                // Five replica processes, a control plane and the recording watch on 2 cores.
                crate::backend::ServerKind::Real => Duration::from_secs(420),
            },
            // The replicas are processes of their own, with their own informers.
            informers: false,
            // On a real server without the partition (see the module doc).
            portable: true,
            run: |o| sharding::sharding(o).boxed(),
        },
        Scenario {
            name: "shard-ranges",
            about: "the sharding scenario in range mode: replica processes claim ranges of the server's shard hash, ring 1 → 3 → 2 → 4, one killed, one frozen past its lease, one partitioned; every change of writer a touch or after a release, checked from the write log (on a real server with ShardedListAndWatch: 400 widgets, no partition, checked from a watch's record of every version)",
            timeout: |o| match o.server {
                crate::backend::ServerKind::Sim => Duration::from_secs(240),
                // Five replica processes, a control plane and the recording watch on 2 cores.
                crate::backend::ServerKind::Real => Duration::from_secs(420),
            },
            // The replicas are processes of their own, with their own informers.
            informers: false,
            // On a real server without the partition (see the module doc).
            portable: true,
            run: |o| shard_ranges::shard_ranges(o).boxed(),
        },
        Scenario {
            name: "selector-transitions",
            about: "a label selector while objects move in and out of it",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| selectors::selector_transitions(o).boxed(),
        },
        Scenario {
            name: "resync-under-churn",
            about: "handlers with no, 1 s and 3 s resync under churn and cut watches",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| resync::resync_under_churn(o).boxed(),
        },
        Scenario {
            name: "crd-informer",
            about: "a CRD created through the API, DynamicObject informers (all, label selector) on its resource, then the CRD deleted",
            timeout: secs(120),
            informers: true,
            portable: false,
            run: |o| crd::crd_informer(o).boxed(),
        },
        Scenario {
            name: "portable-informers",
            about: "paginated list and watch-list, a label and a field selector, under churn (simulator or real server)",
            timeout: secs(240),
            informers: true,
            portable: true,
            run: |o| portable::informers(o).boxed(),
        },
        Scenario {
            name: "portable-relist-410",
            about: "a held watch resumed after compaction: 410, relist, each deletion one tombstone (simulator or real server)",
            timeout: secs(180),
            informers: true,
            portable: true,
            run: |o| portable::relist_410(o).boxed(),
        },
        Scenario {
            name: "portable-crd",
            about: "a CRD made through the API and a DynamicObject informer on it under churn (simulator or real server)",
            timeout: secs(180),
            informers: true,
            portable: true,
            run: |o| portable::crd(o).boxed(),
        },
        Scenario {
            name: "portable-protobuf",
            about: "PbView<Pod> and CompactObject informers on protobuf under churn (simulator or real server)",
            timeout: secs(180),
            informers: true,
            portable: true,
            run: |o| portable::protobuf(o).boxed(),
        },
        Scenario {
            name: "portable-shard-selector",
            about: "server-side sharded lists and watches: 10,000 objects in four uid shards, each object in the shard our hash names and in no other; one shard's informer under churn (simulator or real server)",
            timeout: secs(300),
            informers: true,
            portable: true,
            run: |o| portable::shard_selector(o).boxed(),
        },
        Scenario {
            name: "portable-read-your-writes",
            about: "read your own writes: a cache held at its list's version is stale for the controller's write until the watch brings it (simulator or real server)",
            timeout: secs(120),
            informers: true,
            portable: true,
            run: |o| portable::read_your_writes(o).boxed(),
        },
        Scenario {
            name: "portable-controller-builder",
            about: "the README's controller (ControllerBuilder): a child applied, a condition, a finalizer and an event for each widget under leader election, a hand-over on the leader's stop, then the same program sharded over two replicas (simulator or real server)",
            timeout: secs(240),
            // One controller's informers, run once: the queue variants add nothing here.
            informers: false,
            portable: true,
            run: |o| builder::controller_builder(o).boxed(),
        },
        Scenario {
            name: "portable-writes",
            about: "Api writes: create, merge, JSON, strategic and apply patches, status, scale, dry run, conflicts and retry_on_conflict (simulator or real server)",
            timeout: secs(120),
            // Writes only: no informer, so no queue to vary.
            informers: false,
            portable: true,
            run: |o| portable::writes(o).boxed(),
        },
        Scenario {
            name: "soak",
            about: "minutes of high churn with RSS sampled and checked for growth",
            timeout: |o| Duration::from_secs(o.soak_seconds + 180),
            informers: true,
            portable: false,
            run: |o| soak::soak(o).boxed(),
        },
    ];
    // Before the soak, which is last.
    let soak = all.pop();
    all.extend(hostile_scenarios!(0 1 2 3 4 5 6 7 8 9 10 11 12 13));
    all.extend(soak);
    all
}
