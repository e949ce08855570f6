//! What a benchmark reads of its own process from Linux's `/proc`: memory by `status` field, CPU
//! time of the process and of each thread name. Benchmark support, shared by the informer bench
//! and the peer comparison; every reading is 0 (or empty) where there is no `/proc`.

use std::collections::BTreeMap;

/// A `/proc/self/status` field in MB (`"VmRSS:"`, `"VmHWM:"`, …).
pub fn status_mb(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// User + system seconds from a `stat` file's text (clock ticks of 10 ms).
pub fn stat_cpu_s(stat: &str) -> f64 {
    // Fields after the parenthesised name: utime and stime are the 14th and 15th of the line.
    stat.rfind(')')
        .map(|i| {
            stat[i + 2..]
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|t| t.parse::<f64>().ok())
                .sum::<f64>()
                / 100.0
        })
        .unwrap_or(0.0)
}

/// The process's CPU seconds so far.
pub fn process_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/self/stat").map_or(0.0, |s| stat_cpu_s(&s))
}

/// CPU seconds used so far by this process's threads, summed per thread name.
pub fn thread_cpu() -> BTreeMap<String, f64> {
    let mut by_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return by_name;
    };
    for task in tasks.flatten() {
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(task.path().join("comm")),
            std::fs::read_to_string(task.path().join("stat")),
        ) else {
            continue;
        };
        *by_name.entry(name.trim().to_string()).or_insert(0.0) += stat_cpu_s(&stat);
    }
    by_name
}

/// What the kernel counts of every live thread of this process, summed: CPU time on the scheduler's
/// nanosecond clock (`schedstat`, not the 10 ms ticks of `stat`) and context switches, voluntary
/// (the thread blocked: a futex wait, a read with nothing to read) and involuntary (preempted).
/// A thread that ended between two readings takes its counts with it, so read across a window in
/// which the runtime's threads live (a tokio runtime's workers do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskTotals {
    /// CPU time, nanoseconds.
    pub cpu_ns: u64,
    /// Voluntary context switches.
    pub voluntary_switches: u64,
    /// Involuntary context switches.
    pub involuntary_switches: u64,
}

impl TaskTotals {
    /// The counts gathered between `earlier` and `self` (saturating: a thread that ended makes
    /// a sum smaller).
    pub fn since(self, earlier: TaskTotals) -> TaskTotals {
        TaskTotals {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
        }
    }
}

/// The first field of a `schedstat` file: time on a CPU, nanoseconds.
pub fn schedstat_cpu_ns(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// A `status` file's `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches`.
pub fn status_switches(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// [`TaskTotals`] now, over `/proc/self/task/*` (all zero without `/proc`).
pub fn task_totals() -> TaskTotals {
    let mut totals = TaskTotals::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return totals;
    };
    for task in tasks.flatten() {
        if let Some(ns) = std::fs::read_to_string(task.path().join("schedstat"))
            .ok()
            .as_deref()
            .and_then(schedstat_cpu_ns)
        {
            totals.cpu_ns += ns;
        }
        if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
            let (voluntary, involuntary) = status_switches(&status);
            totals.voluntary_switches += voluntary;
            totals.involuntary_switches += involuntary;
        }
    }
    totals
}

/// The CPU each thread name used between two [`thread_cpu`] readings, for a one-line report.
pub fn cpu_between(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> String {
    after
        .iter()
        .map(|(name, secs)| (name, secs - before.get(name).copied().unwrap_or(0.0)))
        .filter(|(_, secs)| *secs > 0.0)
        .map(|(name, secs)| format!("{name} {secs:.2} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_read_from_the_fields_after_the_name() {
        let stat = "42 (tokio (worker)) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0";
        assert!((stat_cpu_s(stat) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn task_counts_are_read_from_schedstat_and_status() {
        assert_eq!(schedstat_cpu_ns("123456789 42 7\n"), Some(123_456_789));
        assert_eq!(schedstat_cpu_ns(""), None);
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(status_switches(status), (17, 3));
        let later = TaskTotals {
            cpu_ns: 10,
            voluntary_switches: 5,
            involuntary_switches: 1,
        };
        let earlier = TaskTotals {
            cpu_ns: 4,
            voluntary_switches: 7,
            involuntary_switches: 1,
        };
        let window = later.since(earlier);
        assert_eq!((window.cpu_ns, window.voluntary_switches), (6, 0));
    }

    #[test]
    fn this_process_has_counted_some_cpu() {
        let totals = task_totals();
        if std::path::Path::new("/proc/self/task").exists() {
            assert!(totals.cpu_ns > 0);
        }
    }

    #[test]
    fn only_threads_that_used_cpu_are_reported() {
        let before = BTreeMap::from([("a".to_string(), 1.0), ("b".to_string(), 2.0)]);
        let after = BTreeMap::from([("a".to_string(), 1.5), ("b".to_string(), 2.0)]);
        assert_eq!(cpu_between(&before, &after), "a 0.50 s");
    }
}
