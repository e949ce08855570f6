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
    fn only_threads_that_used_cpu_are_reported() {
        let before = BTreeMap::from([("a".to_string(), 1.0), ("b".to_string(), 2.0)]);
        let after = BTreeMap::from([("a".to_string(), 1.5), ("b".to_string(), 2.0)]);
        assert_eq!(cpu_between(&before, &after), "a 0.50 s");
    }
}
