//! Figure 13: the contribution of each MQFS technique. Threads append 4 KiB
//! and fsync a private file each; the base is Ext4 (`classic`), then
//! ccNVMe alone: Ext4 whose JBD2 commits each transaction as one ccNVMe
//! transaction (`classic` with [`JbdCommit::CcNvmeTransaction`], ccNVMe
//! 7.5.1: commit thread, compound transaction and group commit kept),
//! then MQFS (`mq`) with a journal stream per core, then with metadata
//! shadow paging too. On the 905P and the P5800X. Side runs: the paper's
//! artifact's +ccNVMe, MQFS on four streams shared by every thread
//! (`Streams::Pool(4)`, its `nr_streams=4`), without and with shadow
//! paging (`docs/decisions.md` E8).

use mqfs::{FsProfile, JbdCommit, MqOptions, Streams};
use nvme_ctrl::SsdProfile;

use super::append::{measure, Job, Point};
use super::common::{mean, BenchResult, Rig, Span, System};
use super::output::{Panel, Series, Table};
use super::report::{f, Check, FigureOut, Kind, Plot};

/// The streams the paper's artifact mounts +ccNVMe with (`nr_streams=4`).
pub const ARTIFACT_STREAMS: u32 = 4;

/// One bar of the breakdown, or a side run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Ext4 (`classic`).
    Base,
    /// Ext4 (`classic`) whose JBD2 commits through ccNVMe
    /// ([`JbdCommit::CcNvmeTransaction`]).
    CcNvme,
    /// `mq` with a stream per core, shadow paging off.
    MqJournal,
    /// `mq` with both on (MQFS).
    MetaPaging,
    /// Side run: `mq` on [`ARTIFACT_STREAMS`] shared streams, shadow
    /// paging off (the artifact's +ccNVMe).
    ArtifactCcNvme,
    /// Side run: the same with shadow paging on.
    ArtifactCcNvmeShadow,
}

impl Step {
    /// The bars, in the paper's order.
    pub const ALL: [Step; 4] = [Step::Base, Step::CcNvme, Step::MqJournal, Step::MetaPaging];
    /// The side runs.
    pub const SIDE: [Step; 2] = [Step::ArtifactCcNvme, Step::ArtifactCcNvmeShadow];

    /// The paper's legend (a side run's own name).
    pub fn label(self) -> &'static str {
        match self {
            Step::Base => "Base",
            Step::CcNvme => "+ccNVMe",
            Step::MqJournal => "+MQJournal",
            Step::MetaPaging => "+MetaPaging",
            Step::ArtifactCcNvme => "MQFS 4 streams",
            Step::ArtifactCcNvmeShadow => "MQFS 4 streams, shadow paging",
        }
    }

    fn system(self) -> System {
        match self {
            Step::Base | Step::CcNvme => System::Ext4,
            _ => System::Mqfs,
        }
    }

    fn fs_profile(self) -> FsProfile {
        let (streams, shadow_paging) = match self {
            Step::Base | Step::CcNvme => (Streams::PerCore, false),
            Step::MqJournal => (Streams::PerCore, false),
            Step::MetaPaging => (Streams::PerCore, true),
            Step::ArtifactCcNvme => (Streams::Pool(ARTIFACT_STREAMS), false),
            Step::ArtifactCcNvmeShadow => (Streams::Pool(ARTIFACT_STREAMS), true),
        };
        let jbd_commit = match self {
            Step::CcNvme => JbdCommit::CcNvmeTransaction,
            _ => JbdCommit::CommitRecord,
        };
        FsProfile {
            jbd_commit,
            mq: MqOptions {
                streams,
                shadow_paging,
                ..MqOptions::default()
            },
            ..FsProfile::default()
        }
    }
}

/// The sweep.
#[derive(Clone, Debug)]
pub struct Params {
    /// Thread counts (the artifact's: 1, 4, 8, 12, 24).
    pub threads: Vec<usize>,
    /// Drives.
    pub ssds: Vec<SsdProfile>,
    /// Simulated time per point.
    pub span: Span,
}

impl Params {
    /// The full sweep.
    pub fn full() -> Params {
        Params {
            threads: vec![1, 4, 8, 12, 24],
            ssds: vec![SsdProfile::optane_905p(), SsdProfile::optane_p5800x()],
            span: Span::ms(10, 20),
        }
    }

    /// A smoke-test sweep.
    pub fn quick() -> Params {
        Params {
            threads: vec![1, 4],
            ssds: vec![SsdProfile::optane_905p(), SsdProfile::optane_p5800x()],
            span: Span::ms(1, 2),
        }
    }
}

/// A measured bar.
#[derive(Clone, Debug)]
pub struct Bar {
    /// Drive name.
    pub ssd: &'static str,
    /// Technique step.
    pub step: Step,
    /// The measurement.
    pub point: Point,
}

/// Runs the sweep.
pub fn run(p: &Params) -> BenchResult<Vec<Bar>> {
    let mut out = Vec::new();
    for ssd in &p.ssds {
        for &threads in &p.threads {
            for step in Step::ALL.into_iter().chain(Step::SIDE) {
                let base = Rig {
                    fs: step.fs_profile(),
                    ..Rig::new(mqfs::Mode::Mq, ssd.clone(), threads)
                };
                let point = measure(step.system(), ssd, &base, threads, Job::new(4096), p.span)?;
                eprintln!(
                    "fig13 {:<14} {:>2} threads {:<12} {:>8.0} ops/s",
                    ssd.name,
                    threads,
                    step.label(),
                    point.ops_per_sec
                );
                out.push(Bar {
                    ssd: ssd.name,
                    step,
                    point,
                });
            }
        }
    }
    Ok(out)
}

/// The point of `step` on `ssd` at `threads`.
pub fn get<'a>(bars: &'a [Bar], ssd: &str, step: Step, threads: usize) -> Option<&'a Point> {
    bars.iter()
        .find(|b| b.ssd == ssd && b.step == step && b.point.threads == threads)
        .map(|b| &b.point)
}

/// Ratios of each step over the previous one, per thread count.
fn gains(bars: &[Bar], p: &Params, ssd: &str, step: Step, prev: Step) -> Vec<f64> {
    p.threads
        .iter()
        .filter_map(|t| {
            let a = get(bars, ssd, step, *t)?.ops_per_sec;
            let b = get(bars, ssd, prev, *t)?.ops_per_sec;
            (b > 0.0).then(|| a / b)
        })
        .collect()
}

/// The paper's claims.
pub fn checks(bars: &[Bar], p: &Params) -> Vec<Check> {
    let mut c = Vec::new();
    let a = SsdProfile::optane_905p().name;
    let b = SsdProfile::optane_p5800x().name;
    let g = |ssd: &str, s: Step, prev: Step| gains(bars, p, ssd, s, prev);
    let v = g(a, Step::CcNvme, Step::Base);
    if !v.is_empty() {
        let claim = "905P: +ccNVMe / Base throughput, mean over threads";
        c.push(Check::new("F13.1", claim, Kind::Times, 1.4, mean(&v)));
    }
    let v = g(a, Step::MqJournal, Step::CcNvme);
    if !v.is_empty() {
        let claim = "905P: +MQJournal over +ccNVMe, mean over threads";
        c.push(Check::new(
            "F13.2",
            claim,
            Kind::MorePct,
            47.0,
            (mean(&v) - 1.0) * 100.0,
        ));
    }
    let v = g(a, Step::MetaPaging, Step::MqJournal);
    if !v.is_empty() {
        let claim = "905P: +MetaPaging over +MQJournal, mean over threads";
        c.push(Check::new(
            "F13.3",
            claim,
            Kind::MorePct,
            23.0,
            (mean(&v) - 1.0) * 100.0,
        ));
    }
    let v = g(b, Step::CcNvme, Step::Base);
    if !v.is_empty() {
        let claim = "P5800X: +ccNVMe / Base throughput, best point (\"up to\")";
        c.push(Check::new(
            "F13.4",
            claim,
            Kind::Times,
            2.1,
            v.iter().copied().fold(0.0, f64::max),
        ));
    }
    let v = g(b, Step::MqJournal, Step::CcNvme);
    if !v.is_empty() {
        let claim = "P5800X: +MQJournal over +ccNVMe, mean over threads";
        c.push(Check::new(
            "F13.5",
            claim,
            Kind::MorePct,
            53.0,
            (mean(&v) - 1.0) * 100.0,
        ));
    }
    let v = g(b, Step::MetaPaging, Step::MqJournal);
    if !v.is_empty() {
        let claim = "P5800X: +MetaPaging over +MQJournal, mean over threads";
        c.push(Check::new(
            "F13.6",
            claim,
            Kind::MorePct,
            20.0,
            (mean(&v) - 1.0) * 100.0,
        ));
    }
    c
}

/// The CSV.
pub fn table(bars: &[Bar]) -> Table {
    let mut t = Table::new(&[
        "ssd",
        "step",
        "threads",
        "ops_per_sec",
        "mb_per_sec",
        "fsync_mean_us",
        "fsync_p99_us",
        "device_mb_per_sec",
        "device_blocks_per_op",
    ]);
    for b in bars {
        let q = &b.point;
        t.push(vec![
            b.ssd.into(),
            b.step.label().into(),
            q.threads.to_string(),
            f(q.ops_per_sec, 0),
            f(q.mbps, 1),
            f(q.sync.mean, 2),
            f(q.sync.p99, 2),
            f(q.device_mbps, 1),
            f(q.blocks_per_op, 2),
        ]);
    }
    t
}

/// Report view: thousands of fsyncs per second by step and threads.
fn shown(bars: &[Bar], p: &Params, ssd: &str) -> Table {
    let mut header = vec!["threads".to_string()];
    header.extend(Step::ALL.iter().map(|s| s.label().to_string()));
    let mut t = Table {
        header,
        rows: Vec::new(),
    };
    for &th in &p.threads {
        let mut row = vec![th.to_string()];
        for s in Step::ALL {
            row.push(
                get(bars, ssd, s, th)
                    .map(|q| f(q.ops_per_sec / 1e3, 1))
                    .unwrap_or_default(),
            );
        }
        t.push(row);
    }
    t
}

/// Runs Figure 13 and lays out its outputs.
pub fn figure(p: &Params) -> BenchResult<(Vec<Bar>, FigureOut)> {
    let bars = run(p)?;
    let mut panels = Vec::new();
    let mut shown_tables = Vec::new();
    for ssd in &p.ssds {
        let series = Step::ALL
            .iter()
            .map(|s| Series {
                name: s.label().into(),
                points: p
                    .threads
                    .iter()
                    .filter_map(|t| get(&bars, ssd.name, *s, *t).map(|q| (*t as f64, q.ops_per_sec / 1e3)))
                    .collect(),
                bars: None,
            })
            .collect();
        panels.push(Panel::Lines {
            title: format!("{}: 4 KiB append + fsync", ssd.name),
            x: "threads".into(),
            y: "K fsync/s".into(),
            series,
        });
        shown_tables.push((
            format!("{}: thousands of append+fsync per second:", ssd.name),
            shown(&bars, p, ssd.name),
        ));
    }
    let out = FigureOut {
        title: "Figure 13: performance contribution (4 KiB append + fsync)".into(),
        setup: format!(
            "Base = Ext4 (`classic`, JBD2 with a commit record behind PREFLUSH+FUA); +ccNVMe = \
             Ext4 whose JBD2 commits each transaction as one ccNVMe transaction (`classic` with \
             `JbdCommit::CcNvmeTransaction`: the same commit thread, compound transaction and \
             group commit, no commit record, no FLUSH); +MQJournal = `mq` with \
             `MqOptions {{ streams: Streams::PerCore, shadow_paging: false }}`; +MetaPaging = \
             shadow paging on too (MQFS). Side runs: `mq` on {ARTIFACT_STREAMS} shared streams \
             (`Streams::Pool({ARTIFACT_STREAMS})`), without and with shadow paging. Threads {:?}, \
             {} ms warm-up then {} ms measured per point.",
            p.threads,
            p.span.warmup.as_secs_f64() * 1e3,
            p.span.length.as_secs_f64() * 1e3,
        ),
        csv: vec![("fig13".into(), table(&bars))],
        shown: shown_tables,
        plots: vec![Plot {
            stem: "fig13".into(),
            title: "Figure 13: contribution breakdown (simulated)".into(),
            panels,
            cols: 2,
        }],
        checks: checks(&bars, p),
        notes: Vec::new(),
    };
    Ok((bars, out))
}
