//! Figure 11: FIO-style append writes, each followed by fsync (or
//! fdataatomic for MQFS-A), one private file per thread, each thread on its
//! own core; throughput and sync latency by thread count and write size on
//! the Optane 905P.

use nvme_ctrl::SsdProfile;

use super::append::{measure, Job, Point};
use super::common::{mean, BenchResult, Rig, Span, System};
use super::output::{Panel, Series, Table};
use super::report::{f, Check, FigureOut, Kind, Plot};

/// The sweep.
#[derive(Clone, Debug)]
pub struct Params {
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Bytes per append.
    pub sizes: Vec<usize>,
    /// Simulated time per point.
    pub span: Span,
}

impl Params {
    /// The full sweep: 1..24 threads, 4, 16 and 64 KiB.
    pub fn full() -> Params {
        Params {
            threads: vec![1, 2, 4, 8, 12, 16, 20, 24],
            sizes: vec![4096, 16384, 65536],
            span: Span::ms(10, 20),
        }
    }

    /// A smoke-test sweep.
    pub fn quick() -> Params {
        Params {
            threads: vec![1, 4],
            sizes: vec![4096],
            span: Span::ms(1, 2),
        }
    }
}

/// All points of a sweep.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Every point.
    pub points: Vec<Point>,
}

impl Results {
    /// The point of `system` at `threads` and `size`.
    pub fn get(&self, system: System, threads: usize, size: usize) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.system == system && p.threads == threads && p.write_size == size)
    }

    /// Mean over `keys` of `f(MQFS point, other point)`, skipping missing
    /// points; None if none matched.
    fn avg(&self, other: System, keys: &[(usize, usize)], f: impl Fn(&Point, &Point) -> f64) -> Option<f64> {
        let v: Vec<f64> = keys
            .iter()
            .filter_map(|(t, s)| Some(f(self.get(System::Mqfs, *t, *s)?, self.get(other, *t, *s)?)))
            .collect();
        (!v.is_empty()).then(|| mean(&v))
    }
}

/// Runs the sweep on the 905P.
pub fn run(p: &Params) -> BenchResult<Results> {
    let ssd = SsdProfile::optane_905p();
    let base = Rig::new(mqfs::Mode::Mq, ssd.clone(), 1);
    let mut out = Results::default();
    for &size in &p.sizes {
        for &threads in &p.threads {
            for system in System::ALL {
                let pt = measure(system, &ssd, &base, threads, Job::new(size), p.span)?;
                eprintln!(
                    "fig11 {:>3} KiB {:>2} threads {:<8} {:>8.1} MB/s  sync {:>7.1} us",
                    size / 1024,
                    threads,
                    system.label(),
                    pt.mbps,
                    pt.sync.mean
                );
                out.points.push(pt);
            }
        }
    }
    Ok(out)
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn lower_pct(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (1.0 - a / b) * 100.0
    } else {
        0.0
    }
}

/// The paper's Figure 11 claims against `r`.
pub fn checks(r: &Results, p: &Params) -> Vec<Check> {
    let mut c = Vec::new();
    let single: Vec<(usize, usize)> = p.sizes.iter().map(|s| (1, *s)).collect();
    let thr = |m: &Point, o: &Point| ratio(m.ops_per_sec, o.ops_per_sec);
    let lat = |m: &Point, o: &Point| lower_pct(m.sync.mean, o.sync.mean);
    for (other, paper) in [(System::Ext4, 2.1), (System::HoraeFs, 1.9), (System::Ext4Nj, 1.2)] {
        if let Some(v) = r.avg(other, &single, thr) {
            let claim = format!("1 core: MQFS / {} throughput, mean over sizes", other.label());
            c.push(Check::new("F11.1", claim, Kind::Times, paper, v));
        }
    }
    for (other, paper) in [
        (System::Ext4, 56.0),
        (System::HoraeFs, 41.0),
        (System::Ext4Nj, 24.0),
    ] {
        if let Some(v) = r.avg(other, &single, lat) {
            let claim = format!("1 core: MQFS fsync latency vs {}, mean over sizes", other.label());
            c.push(Check::new("F11.2", claim, Kind::LowerPct, paper, v));
        }
    }
    let size = p.sizes.first().copied().unwrap_or(4096);
    let below: Vec<(usize, usize)> = p
        .threads
        .iter()
        .filter(|t| **t > 1 && **t < 12)
        .map(|t| (*t, size))
        .collect();
    for (other, paper) in [(System::Ext4, 2.4), (System::HoraeFs, 1.5), (System::Ext4Nj, 1.1)] {
        let v: Vec<f64> = below
            .iter()
            .filter_map(|(t, s)| Some(thr(r.get(System::Mqfs, *t, *s)?, r.get(other, *t, *s)?)))
            .collect();
        if !v.is_empty() {
            let claim = format!(
                "2-11 threads, {} KiB: MQFS / {} throughput, best point (\"up to\")",
                size / 1024,
                other.label()
            );
            c.push(Check::new(
                "F11.5",
                claim,
                Kind::Times,
                paper,
                v.iter().copied().fold(0.0, f64::max),
            ));
        }
    }
    let multi: Vec<(usize, usize)> = p.threads.iter().filter(|t| **t > 1).map(|t| (*t, size)).collect();
    for (other, paper) in [(System::Ext4, 55.6), (System::HoraeFs, 28.0)] {
        if let Some(v) = r.avg(other, &multi, lat) {
            let claim = format!(
                "2-24 threads, {} KiB: MQFS fsync latency vs {}, mean over threads",
                size / 1024,
                other.label()
            );
            c.push(Check::new("F11.6", claim, Kind::LowerPct, paper, v));
        }
    }
    let above: Vec<(usize, usize)> = p
        .threads
        .iter()
        .filter(|t| **t > 12)
        .map(|t| (*t, size))
        .collect();
    if let Some(v) = r.avg(System::Ext4Nj, &above, thr) {
        let claim = format!(
            "> 12 threads, {} KiB: MQFS throughput as a share of Ext4-NJ's",
            size / 1024
        );
        c.push(Check::new("F11.7", claim, Kind::SharePct, 68.0, v * 100.0));
    }
    for (other, paper) in [(System::Ext4, 2.0), (System::HoraeFs, 1.5)] {
        if let Some(v) = r.avg(other, &above, thr) {
            let claim = format!(
                "> 12 threads, {} KiB: MQFS / {} throughput",
                size / 1024,
                other.label()
            );
            c.push(Check::new("F11.7", claim, Kind::Times, paper, v));
        }
    }
    c
}

/// The CSV of every point.
pub fn table(r: &Results) -> Table {
    let mut t = Table::new(&[
        "system",
        "threads",
        "write_kib",
        "ops_per_sec",
        "mb_per_sec",
        "sync_mean_us",
        "sync_std_us",
        "sync_min_us",
        "sync_p50_us",
        "sync_p99_us",
        "sync_max_us",
        "samples",
        "device_mb_per_sec",
        "device_blocks_per_op",
        "mmio_writes_per_op",
        "ordering_queue_mmio_per_op",
        "irqs_per_op",
        "files_created_in_loop",
    ]);
    for p in &r.points {
        t.push(vec![
            p.system.label().into(),
            p.threads.to_string(),
            (p.write_size / 1024).to_string(),
            f(p.ops_per_sec, 0),
            f(p.mbps, 1),
            f(p.sync.mean, 2),
            f(p.sync.std, 2),
            f(p.sync.min, 2),
            f(p.sync.p50, 2),
            f(p.sync.p99, 2),
            f(p.sync.max, 2),
            p.sync.n.to_string(),
            f(p.device_mbps, 1),
            f(p.blocks_per_op, 2),
            f(p.mmio_per_op, 2),
            f(p.ordering_mmio_per_op, 2),
            f(p.irqs_per_op, 2),
            p.extra_files.to_string(),
        ]);
    }
    t
}

/// A per-thread-count table of one metric for one size (report view).
fn shown(r: &Results, p: &Params, size: usize, metric: impl Fn(&Point) -> String) -> Table {
    let mut header = vec!["threads".to_string()];
    header.extend(System::ALL.iter().map(|s| s.label().to_string()));
    let mut t = Table {
        header,
        rows: Vec::new(),
    };
    for &th in &p.threads {
        let mut row = vec![th.to_string()];
        for s in System::ALL {
            row.push(r.get(s, th, size).map(&metric).unwrap_or_default());
        }
        t.push(row);
    }
    t
}

/// The plot: throughput and latency (mean, error bar one standard
/// deviation, as the paper's) against threads, one row per write size.
pub fn plot(r: &Results, p: &Params) -> Plot {
    let mut panels = Vec::new();
    for &size in &p.sizes {
        let pts = |s: System| -> Vec<&Point> {
            p.threads
                .iter()
                .filter_map(|t| r.get(s, *t, size))
                .collect::<Vec<_>>()
        };
        let thr: Vec<Series> = System::ALL
            .iter()
            .map(|s| Series {
                name: s.label().into(),
                points: pts(*s).iter().map(|q| (q.threads as f64, q.mbps)).collect(),
                bars: None,
            })
            .collect();
        let lat: Vec<Series> = System::ALL
            .iter()
            .map(|s| Series {
                name: s.label().into(),
                points: pts(*s).iter().map(|q| (q.threads as f64, q.sync.mean)).collect(),
                bars: Some(
                    pts(*s)
                        .iter()
                        .map(|q| ((q.sync.mean - q.sync.std).max(0.0), q.sync.mean + q.sync.std))
                        .collect(),
                ),
            })
            .collect();
        panels.push(Panel::Lines {
            title: format!("{} KiB appends: throughput", size / 1024),
            x: "threads".into(),
            y: "MB/s".into(),
            series: thr,
        });
        panels.push(Panel::Lines {
            title: format!("{} KiB appends: sync latency (mean +- std)", size / 1024),
            x: "threads".into(),
            y: "us".into(),
            series: lat,
        });
    }
    Plot {
        stem: "fig11".into(),
        title: "Figure 11: append + fsync / fdataatomic on Optane 905P (simulated)".into(),
        panels,
        cols: 2,
    }
}

/// Runs Figure 11 and lays out its outputs (the analysis notes are added
/// by [`super::analysis`]).
pub fn figure(p: &Params) -> BenchResult<(Results, FigureOut)> {
    let r = run(p)?;
    let size = p.sizes.first().copied().unwrap_or(4096);
    let out = FigureOut {
        title: "Figure 11: file system performance (append + fsync, Optane 905P)".into(),
        setup: format!(
            "Each thread appends to its own file and syncs after every append (fsync; MQFS-A: \
             fdataatomic), on its own core. Threads {:?}, write sizes {:?} KiB, {} ms warm-up then \
             {} ms measured per point (simulated time).",
            p.threads,
            p.sizes.iter().map(|s| s / 1024).collect::<Vec<_>>(),
            p.span.warmup.as_secs_f64() * 1e3,
            p.span.length.as_secs_f64() * 1e3,
        ),
        csv: vec![("fig11".into(), table(&r))],
        shown: vec![
            (
                format!("Throughput, {} KiB appends (MB/s of appended data):", size / 1024),
                shown(&r, p, size, |q| f(q.mbps, 1)),
            ),
            (
                format!("Sync latency, {} KiB appends: mean / p99 (us):", size / 1024),
                shown(&r, p, size, |q| format!("{:.1} / {:.1}", q.sync.mean, q.sync.p99)),
            ),
            (
                format!(
                    "Device write traffic, {} KiB appends: MB/s the drive fetched (4 KiB blocks per append):",
                    size / 1024
                ),
                shown(&r, p, size, |q| {
                    format!("{:.0} ({:.2})", q.device_mbps, q.blocks_per_op)
                }),
            ),
        ],
        plots: vec![plot(&r, p)],
        checks: checks(&r, p),
        notes: Vec::new(),
    };
    Ok((r, out))
}
