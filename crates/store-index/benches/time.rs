//! The workspace's one date codec (`store_index::time`) against `jiff`'s, on what the decode path
//! does with every object: format a `meta.v1.Time` read off protobuf (`creationTimestamp`, to the
//! second) or a `MicroTime` (six digits), and parse one out of JSON for the transcoder. Run with
//! `cargo bench -p store-index --bench time`; each group has `ours` and `jiff` on the same 1,000
//! timestamps, so the figure to read is their ratio.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use jiff::fmt::temporal::{DateTimeParser, DateTimePrinter};
use store_index::time::{format_rfc3339, parse_rfc3339};

const TIMES: i64 = 1_000;

/// Seconds and nanoseconds spread over a few years around now, as a cache's objects are.
fn instants() -> Vec<(i64, i32)> {
    (0..TIMES)
        .map(|i| {
            let secs = 1_700_000_000 + i * 97_213;
            (secs, ((i * 7_919_993) % 1_000_000_000) as i32)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let instants = instants();
    let jiff_instants: Vec<jiff::Timestamp> = instants
        .iter()
        .map(|&(s, n)| jiff::Timestamp::new(s, n).expect("in jiff's range"))
        .collect();
    let texts: Vec<String> = instants
        .iter()
        .map(|&(s, n)| format_rfc3339(s, n, 6))
        .collect();

    for (name, digits) in [("seconds", 0usize), ("micros", 6)] {
        let mut group = c.benchmark_group(format!("time/format_{name}"));
        group.throughput(Throughput::Elements(TIMES as u64));
        group.bench_function("ours", |b| {
            b.iter(|| {
                for &(s, n) in &instants {
                    black_box(format_rfc3339(s, n, digits));
                }
            })
        });
        let printer = DateTimePrinter::new().precision(Some(digits as u8));
        group.bench_function("jiff", |b| {
            b.iter(|| {
                for t in &jiff_instants {
                    let mut out = String::new();
                    printer.print_timestamp(t, &mut out).expect("a String");
                    black_box(out);
                }
            })
        });
        group.finish();
    }

    let mut group = c.benchmark_group("time/parse");
    group.throughput(Throughput::Elements(TIMES as u64));
    group.bench_function("ours", |b| {
        b.iter(|| {
            for t in &texts {
                black_box(parse_rfc3339(t));
            }
        })
    });
    let parser = DateTimeParser::new();
    group.bench_function("jiff", |b| {
        b.iter(|| {
            for t in &texts {
                black_box(parser.parse_timestamp(t).ok());
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
