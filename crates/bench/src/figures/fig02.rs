//! Figure 2 (motivation, ccNVMe section 3): 4 KiB appends, each followed
//! by fsync, one private file per thread, for Ext4, HoraeFS and Ext4-NJ
//! on three drives of increasing speed: the Intel 750 (flash, Figure 2(a)),
//! the Optane 905P and the Optane P5800X (Figure 2(b) and (c); the paper
//! does not name their panels, the order of age is assumed). The workload
//! is Figure 11's ([`super::append`]).

use nvme_ctrl::SsdProfile;

use super::append::{measure, Job, Point};
use super::common::{BenchResult, Rig, Span, System};
use super::output::{Panel, Series, Table};
use super::report::{f, side_verdict, Check, FigureOut, Kind, Plot};

/// The systems of Figure 2.
pub const SYSTEMS: [System; 3] = [System::Ext4, System::HoraeFs, System::Ext4Nj];

/// The drives, oldest first: (panel, profile).
fn drives() -> [(&'static str, SsdProfile); 3] {
    [
        ("a", SsdProfile::intel_750()),
        ("b", SsdProfile::optane_905p()),
        ("c", SsdProfile::optane_p5800x()),
    ]
}

/// The sweep.
#[derive(Clone, Debug)]
pub struct Params {
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Simulated time per point.
    pub span: Span,
}

impl Params {
    /// Up to the paper's 24 threads.
    pub fn full() -> Params {
        Params {
            threads: vec![1, 4, 8, 16, 24],
            span: Span::ms(5, 10),
        }
    }

    /// A smoke test.
    pub fn quick() -> Params {
        Params {
            threads: vec![1, 8],
            span: Span::ms(1, 2),
        }
    }
}

/// One point: a drive's panel and the append measurement.
#[derive(Clone, Debug)]
pub struct DrivePoint {
    /// "a", "b" or "c".
    pub panel: &'static str,
    /// The drive's name.
    pub drive: &'static str,
    /// The measurement.
    pub point: Point,
}

/// The paper's Ext4-NJ over HoraeFS on the P5800X at the most threads,
/// percent (F2.3).
const NJ_OVER_HORAE_PCT: f64 = 66.0;

/// Every point.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Every point.
    pub points: Vec<DrivePoint>,
}

impl Results {
    fn point(&self, panel: &str, s: System, threads: usize) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.panel == panel && p.point.system == s && p.point.threads == threads)
            .map(|p| &p.point)
    }

    fn ops(&self, panel: &str, s: System, threads: usize) -> Option<f64> {
        self.point(panel, s, threads).map(|p| p.ops_per_sec)
    }
}

/// The analysis at the sweep's largest thread count: what each system
/// sends the drive per append, and a side experiment that gives every
/// drive 64 media units (same program time, link and latency), isolating
/// what the media's unit queues cost Ext4-NJ.
fn notes(r: &Results, p: &Params) -> BenchResult<Vec<String>> {
    let Some(&most) = p.threads.iter().max() else {
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    for (panel, ssd) in drives() {
        let (Some(e), Some(h), Some(nj)) = (
            r.point(panel, System::Ext4, most),
            r.point(panel, System::HoraeFs, most),
            r.point(panel, System::Ext4Nj, most),
        ) else {
            return Ok(Vec::new());
        };
        let wide = SsdProfile {
            units: 64,
            ..ssd.clone()
        };
        let base = Rig::new(mqfs::Mode::Mq, wide.clone(), 1);
        let nj_wide = measure(System::Ext4Nj, &wide, &base, most, Job::new(4096), p.span)?;
        let blocks = |x: &Point| if x.mbps > 0.0 { x.device_mbps / x.mbps } else { 0.0 };
        let slower = e.ops_per_sec.min(h.ops_per_sec);
        let ratio = |nj: f64| if slower > 0.0 { nj / slower } else { 0.0 };
        rows.push(format!(
            "{} ({}): Ext4 {:.0} MB/s ({:.2} blocks per append), HoraeFS {:.0} ({:.2}), Ext4-NJ {:.0} \
             ({:.2}; {:.0} with 64 units), overhead {:.2}x ({:.2}x with 64 units)",
            panel,
            ssd.name,
            e.mbps,
            blocks(e),
            h.mbps,
            blocks(h),
            nj.mbps,
            blocks(nj),
            nj_wide.mbps,
            ratio(nj.ops_per_sec),
            ratio(nj_wide.ops_per_sec),
        ));
        let change = nj_wide.mbps / nj.mbps.max(1e-9);
        verdicts.push(format!(
            "on the {} Ext4-NJ {}",
            ssd.name,
            if change > 1.1 {
                format!(
                    "gains {:.0}%: the unit queues are part of its bound",
                    (change - 1.0) * 100.0
                )
            } else if change < 0.9 {
                format!(
                    "loses {:.0}%: not bound by the media; its throughput moves with when the \
                     threads' writes of shared blocks meet, which this experiment does not isolate",
                    (1.0 - change) * 100.0
                )
            } else {
                "is within 10%: not bound by the media".to_string()
            }
        ));
    }
    // F2.3's side experiment: HoraeFS on the P5800X without the ordering
    // queue's zero-length read (`DriverFaults::no_flush_read`, the one
    // change; `docs/decisions.md` H18).
    let mut f23 = String::new();
    if let (Some((_, ssd)), Some(h), Some(nj)) = (
        drives().into_iter().find(|(panel, _)| *panel == "c"),
        r.point("c", System::HoraeFs, most),
        r.point("c", System::Ext4Nj, most),
    ) {
        let mut base = Rig::new(mqfs::Mode::Mq, ssd.clone(), 1);
        base.fs.driver.faults.no_flush_read = true;
        let h2 = measure(System::HoraeFs, &ssd, &base, most, Job::new(4096), p.span)?;
        let more = |x: f64| (nj.ops_per_sec / x.max(1.0) - 1.0) * 100.0;
        let (with, without) = (more(h.ops_per_sec), more(h2.ops_per_sec));
        f23 = format!(
            "**HoraeFS on the P5800X without the zero-length read (F2.3).** Side experiment: HoraeFS \
             at {most} threads with the ordering queue's writes made without their zero-length read, \
             as HoRAE's released module makes them (`DriverFaults::no_flush_read`, the one change; \
             not crash-consistent, `docs/decisions.md` H18): {:.0} -> {:.0} MB/s, Ext4-NJ over \
             HoraeFS {with:+.0}% -> {without:+.0}% (paper {NJ_OVER_HORAE_PCT:+.0}%): {}.",
            h.mbps,
            h2.mbps,
            side_verdict(Kind::MorePct, NJ_OVER_HORAE_PCT, with, without, "the read"),
        );
    }
    let mut out = vec![format!(
        "**What each system sends the drive at {most} threads, and whether the media bounds Ext4-NJ (F2.2-F2.4).** \
         Per drive: {}. Ext4 and HoraeFS batch the appends of every thread that fsynced meanwhile \
         into one JBD2 commit (group commit), so their blocks per append fall as threads are added \
         and the faster the drive, the shorter a commit and the more they keep up. Ext4-NJ's fsync \
         writes the data, then the inode-table block its inode shares with other threads' inodes \
         (one write of a block at a time, Linux's buffer lock) and waits for each. Side \
         experiment: the same drives with 64 media units instead of their own \
         (`SsdProfile::units`, the drive's random-write IOPS times its program time): {}. Where \
         Ext4 comes close to Ext4-NJ the model's JBD2 scales better than Linux 4.18's, whose \
         commit phases and locks (`j_state_lock`, the list locks) the model charges no time for \
         (Figure 11).",
        rows.join("; "),
        verdicts.join("; "),
    )];
    if !f23.is_empty() {
        out.push(f23);
    }
    Ok(out)
}

/// Runs the sweep.
pub fn run(p: &Params) -> BenchResult<Results> {
    let mut out = Results::default();
    for (panel, ssd) in drives() {
        let base = Rig::new(mqfs::Mode::Mq, ssd.clone(), 1);
        for &threads in &p.threads {
            for system in SYSTEMS {
                let point = measure(system, &ssd, &base, threads, Job::new(4096), p.span)?;
                eprintln!(
                    "fig02 ({panel}) {:<14} {threads:>2} threads {:<8} {:>8.1} MB/s",
                    ssd.name,
                    system.label(),
                    point.mbps
                );
                out.points.push(DrivePoint {
                    panel,
                    drive: ssd.name,
                    point,
                });
            }
        }
    }
    Ok(out)
}

/// The paper's Figure 2 claims at the sweep's largest thread count.
pub fn checks(r: &Results, p: &Params) -> Vec<Check> {
    let mut c = Vec::new();
    let Some(&most) = p.threads.iter().max() else {
        return c;
    };
    let ops = |panel, s| r.ops(panel, s, most);
    // Crash-consistency overhead on a drive: Ext4-NJ over the slower of
    // Ext4 and HoraeFS.
    let overhead = |panel| -> Option<f64> {
        let nj = ops(panel, System::Ext4Nj)?;
        let cc = ops(panel, System::Ext4)?.min(ops(panel, System::HoraeFs)?);
        (cc > 0.0).then(|| nj / cc)
    };
    if let (Some(e), Some(h), Some(nj)) = (
        ops("a", System::Ext4),
        ops("a", System::HoraeFs),
        ops("a", System::Ext4Nj),
    ) {
        c.push(Check::holds(
            "F2.1",
            format!(
                "Intel 750, {most} threads: Ext4 and HoraeFS comparable to Ext4-NJ (within 10%) or faster"
            ),
            e >= 0.9 * nj && h >= 0.9 * nj,
        ));
    }
    if let (Some(a), Some(b), Some(cc)) = (overhead("a"), overhead("b"), overhead("c")) {
        c.push(Check::holds(
            "F2.2",
            format!(
                "{most} threads: the crash-consistency overhead (Ext4-NJ over the slower journaled \
                 system) grows with drive speed: {a:.2}x, {b:.2}x, {cc:.2}x"
            ),
            a < b && b < cc,
        ));
    }
    if let (Some(nj), Some(h)) = (ops("c", System::Ext4Nj), ops("c", System::HoraeFs)) {
        c.push(Check::new(
            "F2.3",
            format!("P5800X, {most} threads: Ext4-NJ over HoraeFS throughput"),
            Kind::MorePct,
            NJ_OVER_HORAE_PCT,
            if h > 0.0 { (nj / h - 1.0) * 100.0 } else { 0.0 },
        ));
    }
    let newer_short = ["b", "c"].iter().all(|panel| {
        let nj = ops(panel, System::Ext4Nj).unwrap_or(0.0);
        [System::Ext4, System::HoraeFs]
            .iter()
            .all(|s| ops(panel, *s).is_some_and(|v| v < 0.9 * nj))
    });
    c.push(Check::holds(
        "F2.4",
        format!("905P and P5800X, {most} threads: Ext4 and HoraeFS stay more than 10% below Ext4-NJ"),
        newer_short,
    ));
    c
}

fn table(r: &Results) -> Table {
    let mut t = Table::new(&[
        "panel",
        "drive",
        "system",
        "threads",
        "mb_per_sec",
        "device_mb_per_sec",
        "sync_mean_us",
    ]);
    for p in &r.points {
        t.push(vec![
            p.panel.into(),
            p.drive.into(),
            p.point.system.label().into(),
            p.point.threads.to_string(),
            f(p.point.mbps, 1),
            f(p.point.device_mbps, 1),
            f(p.point.sync.mean, 2),
        ]);
    }
    t
}

fn plot(r: &Results, p: &Params) -> Plot {
    let panels = drives()
        .iter()
        .map(|(panel, ssd)| Panel::Lines {
            title: format!("({panel}) {}", ssd.name),
            x: "threads".into(),
            y: "MB/s".into(),
            series: SYSTEMS
                .iter()
                .map(|s| Series {
                    name: s.label().into(),
                    points: p
                        .threads
                        .iter()
                        .filter_map(|t| Some((*t as f64, r.ops(panel, *s, *t)? * 4096.0 / 1e6)))
                        .collect(),
                    bars: None,
                })
                .collect(),
        })
        .collect();
    Plot {
        stem: "fig02".into(),
        title: "Figure 2: append + fsync on three drives (simulated)".into(),
        panels,
        cols: 3,
    }
}

/// Runs Figure 2 and lays out its outputs.
pub fn figure(p: &Params) -> BenchResult<(Results, FigureOut)> {
    let r = run(p)?;
    let notes = notes(&r, p)?;
    let out = FigureOut {
        title: "Figure 2: the cost of crash consistency grows with drive speed".into(),
        setup: format!(
            "Figure 11's workload (4 KiB appends, fsync after each, a private file per thread, one \
             core per thread) for Ext4, HoraeFS and Ext4-NJ on the Intel 750 (a), the Optane 905P \
             (b) and the Optane P5800X (c). Threads {:?}, {} ms warm-up then {} ms measured per \
             point (simulated).",
            p.threads,
            p.span.warmup.as_secs_f64() * 1e3,
            p.span.length.as_secs_f64() * 1e3,
        ),
        csv: vec![("fig02".into(), table(&r))],
        shown: Vec::new(),
        plots: vec![plot(&r, p)],
        checks: checks(&r, p),
        notes,
    };
    Ok((r, out))
}
