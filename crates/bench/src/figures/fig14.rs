//! Figure 14: the latency of one thread's loop of create, write 4 KiB and
//! fsync, call by call, MQFS against Ext4-NJ (and, for reference, the other
//! systems), plus MQFS with fatomic in place of fsync. Bus counters per
//! loop show what each sync put on the wire.

use mqfs::{Ctx, Mode};
use nvme_ctrl::SsdProfile;
use nvme_spec::traffic;
use pcie_sim::{Counters, EventKind};

use super::common::{block_on, mean, BenchResult, Rig};
use super::output::{Panel, Table};
use super::report::{f, Check, FigureOut, Kind, Plot};

/// A column of the figure: a mode and its sync call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Ext4-NJ with fsync.
    Ext4Nj,
    /// Ext4 with fsync.
    Ext4,
    /// HoraeFS with fsync.
    HoraeFs,
    /// MQFS with fsync.
    Mqfs,
    /// MQFS with fatomic.
    MqfsFatomic,
}

impl Variant {
    /// Every column.
    pub const ALL: [Variant; 5] = [
        Variant::Ext4Nj,
        Variant::Mqfs,
        Variant::MqfsFatomic,
        Variant::Ext4,
        Variant::HoraeFs,
    ];

    /// Its name.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Ext4Nj => "Ext4-NJ (fsync)",
            Variant::Ext4 => "Ext4 (fsync)",
            Variant::HoraeFs => "HoraeFS (fsync)",
            Variant::Mqfs => "MQFS (fsync)",
            Variant::MqfsFatomic => "MQFS (fatomic)",
        }
    }

    fn mode(self) -> Mode {
        match self {
            Variant::Ext4Nj => Mode::None,
            Variant::Ext4 => Mode::Classic,
            Variant::HoraeFs => Mode::Horae,
            Variant::Mqfs | Variant::MqfsFatomic => Mode::Mq,
        }
    }
}

/// The run's size.
#[derive(Clone, Debug)]
pub struct Params {
    /// Loops measured.
    pub loops: usize,
    /// Loops run first and not measured (cold caches).
    pub warmup: usize,
}

impl Params {
    /// The full run.
    pub fn full() -> Params {
        Params {
            loops: 256,
            warmup: 16,
        }
    }

    /// A smoke test.
    pub fn quick() -> Params {
        Params { loops: 32, warmup: 4 }
    }
}

/// Mean latencies of one column, in microseconds, and bus events per loop.
#[derive(Clone, Debug)]
pub struct Breakdown {
    /// The column.
    pub variant: Variant,
    /// create().
    pub create: f64,
    /// write() of 4 KiB.
    pub write: f64,
    /// fsync() or fatomic().
    pub sync: f64,
    /// Of `sync`, the time the thread's core ran interrupt handlers (the
    /// completions of this call's transaction and of earlier ones:
    /// handler entry, reaping, what the handler writes to the device;
    /// `pcie_sim::CpuStats::irq`).
    pub sync_irq: f64,
    /// 4 KiB blocks the device fetched per loop.
    pub blocks: f64,
    /// MSI-X interrupts per loop.
    pub irqs: f64,
    /// Host MMIO writes per loop (doorbells, P-SQ entries, ordering queue).
    pub mmio_writes: f64,
}

impl Breakdown {
    /// The whole loop.
    pub fn total(&self) -> f64 {
        self.create + self.write + self.sync
    }
}

/// Runs the loop for `v` on the 905P.
pub fn measure(v: Variant, p: &Params) -> BenchResult<Breakdown> {
    let t = Rig::new(v.mode(), SsdProfile::optane_905p(), 1).build()?;
    let fs = t.fs.clone();
    let m = t.machine.clone();
    let (loops, warmup) = (p.loops, p.warmup);
    let (lat, counters) = block_on(&t, async move {
        let ctx = Ctx::on(0);
        let sim = m.sim();
        let dir = fs.mkdir_path(ctx, "/fig14").await?.ino;
        fs.sync(ctx).await?;
        let data = vec![0x5au8; 4096];
        let core = m.core(0)?;
        let mut lat: Vec<[u64; 4]> = Vec::new();
        let mut before: Option<Counters> = None;
        for i in 0..warmup + loops {
            if i == warmup {
                before = Some(m.counters());
            }
            let t0 = sim.now();
            let ino = fs.create(ctx, dir, &format!("f{i}"), 0o644).await?.ino;
            let t1 = sim.now();
            fs.write(ctx, ino, 0, &data).await?;
            let t2 = sim.now();
            let irq0 = core.stats().irq;
            match v {
                Variant::MqfsFatomic => fs.fatomic(ctx, ino).await?,
                _ => fs.fsync(ctx, ino).await?,
            }
            let t3 = sim.now();
            let irq = core.stats().irq - irq0;
            if i >= warmup {
                lat.push([
                    (t1 - t0).as_ps(),
                    (t2 - t1).as_ps(),
                    (t3 - t2).as_ps(),
                    irq.as_ps(),
                ]);
            }
        }
        let c = before.map(|b| m.counters().since(&b)).unwrap_or_default();
        Ok((lat, c))
    })?;
    let us = |k: usize| mean(&lat.iter().map(|l| l[k] as f64 / 1e6).collect::<Vec<_>>());
    let n = lat.len().max(1) as f64;
    Ok(Breakdown {
        variant: v,
        create: us(0),
        write: us(1),
        sync: us(2),
        sync_irq: us(3),
        blocks: counters
            .get(EventKind::DmaReadCompletion, traffic::DATA_BLOCK)
            .payload_bytes as f64
            / 4096.0
            / n,
        irqs: counters.kind(EventKind::Msix).ops as f64 / n,
        mmio_writes: counters.kind(EventKind::MmioWrite).ops as f64 / n,
    })
}

fn get(rows: &[Breakdown], v: Variant) -> Option<&Breakdown> {
    rows.iter().find(|r| r.variant == v)
}

/// The paper's fatomic call in the loop (7.5.2: "atomicity guarantee
/// (i.e., fatomic) costs only around 10 us"), F14.2.
pub const FATOMIC_US: f64 = 10.0;

/// The paper's claims.
pub fn checks(rows: &[Breakdown]) -> Vec<Check> {
    let mut c = Vec::new();
    if let (Some(m), Some(n)) = (get(rows, Variant::Mqfs), get(rows, Variant::Ext4Nj)) {
        let claim = "create + write + fsync loop: MQFS latency vs Ext4-NJ";
        c.push(Check::new(
            "F14.1",
            claim,
            Kind::LowerPct,
            42.0,
            (1.0 - m.total() / n.total()) * 100.0,
        ));
    }
    if let Some(a) = get(rows, Variant::MqfsFatomic) {
        let claim = "fatomic call (atomicity guarantee) in that loop";
        c.push(Check::new("F14.2", claim, Kind::Micros, FATOMIC_US, a.sync));
    }
    c
}

/// Runs Figure 14 and lays out its outputs.
pub fn figure(p: &Params) -> BenchResult<(Vec<Breakdown>, FigureOut)> {
    let mut rows = Vec::new();
    for v in Variant::ALL {
        let b = measure(v, p)?;
        eprintln!(
            "fig14 {:<16} create {:>6.1} write {:>6.1} sync {:>6.1} us",
            v.label(),
            b.create,
            b.write,
            b.sync
        );
        rows.push(b);
    }
    let mut t = Table::new(&[
        "variant",
        "create_us",
        "write_us",
        "sync_us",
        "total_us",
        "device_blocks_per_loop",
        "irqs_per_loop",
        "mmio_writes_per_loop",
    ]);
    for r in &rows {
        t.push(vec![
            r.variant.label().into(),
            f(r.create, 2),
            f(r.write, 2),
            f(r.sync, 2),
            f(r.total(), 2),
            f(r.blocks, 2),
            f(r.irqs, 2),
            f(r.mmio_writes, 2),
        ]);
    }
    let phases = ["create", "write 4 KiB", "fsync / fatomic"];
    let panel = Panel::Bars {
        title: "mean latency per call".into(),
        y: "us".into(),
        groups: rows.iter().map(|r| r.variant.label().to_string()).collect(),
        series: phases
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let v = rows.iter().map(|r| [r.create, r.write, r.sync][k]).collect();
                (name.to_string(), v)
            })
            .collect(),
    };
    let out = FigureOut {
        title: "Figure 14: latency breakdown (create, write 4 KiB, fsync; one thread, 905P)".into(),
        setup: format!(
            "One thread repeats create, write 4 KiB, fsync (or fatomic) on new files in one \
             directory; {} loops measured after {} unmeasured. Simulated time of each call; bus \
             events per loop from the machine's counters.",
            p.loops, p.warmup
        ),
        csv: vec![("fig14".into(), t.clone())],
        shown: vec![("Mean latency per call (us) and bus events per loop:".into(), t)],
        plots: vec![Plot {
            stem: "fig14".into(),
            title: "Figure 14: latency per call (simulated)".into(),
            panels: vec![panel],
            cols: 1,
        }],
        checks: checks(&rows),
        notes: Vec::new(),
    };
    Ok((rows, out))
}
