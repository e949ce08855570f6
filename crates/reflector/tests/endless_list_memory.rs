//! Peak memory against a list body that never ends (contract H3), measured in a process of its
//! own: this binary holds only this test, so the process's high-water mark (`VmHWM`) is what
//! reading the simulator's endless list costs, simulator included.

use std::sync::Arc;

use reflector::delta_fifo::{FifoError, Store};
use reflector::store_index::{DynamicObject, ResourceVersion};
use reflector::{ClusterConfig, HttpListerWatcher, Reflector, ReflectorOptions, Resource};
use sim_apiserver::{ListFault, SimServer};
use tokio_util::sync::CancellationToken;

/// The bound the issue sets: an endless body may cost an informer at most 512 MB.
const MAX_PEAK_BYTES: u64 = 512_000_000;

/// A store that must never be written to: the list never completes.
struct Untouched;

impl Store<DynamicObject> for Untouched {
    fn add(&self, _: Arc<DynamicObject>) -> Result<(), FifoError> {
        unreachable!("nothing of an endless list is stored")
    }
    fn update(&self, _: Arc<DynamicObject>) -> Result<(), FifoError> {
        unreachable!("nothing of an endless list is stored")
    }
    fn delete(&self, _: Arc<DynamicObject>) -> Result<(), FifoError> {
        unreachable!("nothing of an endless list is stored")
    }
    fn replace(&self, _: Vec<Arc<DynamicObject>>, _: &ResourceVersion) -> Result<(), FifoError> {
        unreachable!("nothing of an endless list is stored")
    }
    fn resync(&self) -> Result<(), FifoError> {
        Ok(())
    }
}

fn peak_resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_list_body_costs_under_512_mb_with_the_default_bounds() {
    let sim = SimServer::start().await.unwrap();
    // Every request of the list's smaller retries is endless too.
    sim.faults().list_body(ListFault::Endless, 100);
    let config = ClusterConfig::new(&sim.url()).unwrap();
    let lw =
        HttpListerWatcher::<DynamicObject>::new(&config, Resource::namespaced("", "v1", "pods"))
            .unwrap();
    // A list, not the default watch-list: the list's body is what is bounded here.
    let options = ReflectorOptions {
        watch_list: false,
        ..ReflectorOptions::default()
    };
    let reflector = Reflector::new(lw, Untouched, options);
    let err = reflector
        .list_and_watch(&CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.is_body_too_large(), "{err}");
    let peak = peak_resident_bytes();
    eprintln!("peak resident memory: {} MB", peak / 1_000_000);
    assert!(
        peak <= MAX_PEAK_BYTES,
        "peak resident memory {} MB (at most {} MB)",
        peak / 1_000_000,
        MAX_PEAK_BYTES / 1_000_000
    );
}
