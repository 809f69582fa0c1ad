//! Figure 10: atomic transactions on the block device (no file system), on
//! the P5800X: transactions per second and I/O utilization of the classic,
//! Horae, ccNVMe and ccNVMe-atomic approaches ([`super::txbench`]), by
//! transaction size on one core (Figure 10(a, b)) and by thread count with
//! 4 KiB transactions (Figure 10(c, d)).

use nvme_ctrl::SsdProfile;
use pcie_sim::SimDuration;

use super::common::{mean, BenchResult};
use super::output::{Panel, Series, Table};
use super::report::{f, Check, FigureOut, Kind, Plot};
use super::txbench::{run as run_tx, run_with, Approach, TxResult, MAX_BANDWIDTH};
use ccnvme::{DriverProfile, EntryPersist};

/// The sweep.
#[derive(Clone, Debug)]
pub struct Params {
    /// Transaction sizes in 4 KiB blocks (one thread).
    pub sizes: Vec<usize>,
    /// Thread counts (4 KiB transactions).
    pub threads: Vec<usize>,
    /// Simulated time per point.
    pub duration: SimDuration,
}

impl Params {
    /// The paper's sweep (its artifact's sizes; threads up to 12).
    pub fn full() -> Params {
        Params {
            sizes: vec![1, 2, 4, 8, 16],
            threads: vec![1, 2, 4, 6, 8, 10, 12],
            duration: SimDuration::from_ms(4),
        }
    }

    /// A smoke test.
    pub fn quick() -> Params {
        Params {
            sizes: vec![1, 16],
            threads: vec![1, 2, 8, 12],
            duration: SimDuration::from_ms(1),
        }
    }
}

/// One measured point.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    /// The approach.
    pub approach: Approach,
    /// Threads (and cores).
    pub threads: usize,
    /// Blocks per transaction.
    pub blocks: usize,
    /// The measurement.
    pub r: TxResult,
}

/// Every point of a sweep.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Every point.
    pub points: Vec<Point>,
}

impl Results {
    fn get(&self, a: Approach, threads: usize, blocks: usize) -> Option<TxResult> {
        self.points
            .iter()
            .find(|p| p.approach == a && p.threads == threads && p.blocks == blocks)
            .map(|p| p.r)
    }
}

/// Runs the sweep on the P5800X.
pub fn run(p: &Params) -> BenchResult<Results> {
    let ssd = SsdProfile::optane_p5800x();
    let mut keys: Vec<(usize, usize)> = p.sizes.iter().map(|b| (1, *b)).collect();
    keys.extend(
        p.threads
            .iter()
            .filter(|t| **t != 1 || !p.sizes.contains(&1))
            .map(|t| (*t, 1)),
    );
    let mut out = Results::default();
    for (threads, blocks) in keys {
        for a in Approach::ALL {
            let r = run_tx(&ssd, a, threads, blocks, p.duration)?;
            eprintln!(
                "fig10 {:<13} {threads:>2} threads {:>2} KiB {:>8.0} TPS  util {:>3.0}%",
                a.name(),
                blocks * 4,
                r.tps,
                r.utilization * 100.0
            );
            out.points.push(Point {
                approach: a,
                threads,
                blocks,
                r,
            });
        }
    }
    Ok(out)
}

/// Threads `a` needs to use 90% of the drive's bandwidth, if any point
/// of the sweep does.
fn saturating_threads(r: &Results, p: &Params, a: Approach) -> Option<usize> {
    p.threads
        .iter()
        .copied()
        .find(|t| r.get(a, *t, 1).is_some_and(|x| x.utilization >= 0.9))
}

/// The paper's Figure 10 claims (section 7.2) against `r`.
pub fn checks(r: &Results, p: &Params) -> Vec<Check> {
    let mut c = Vec::new();
    let avg = |x: Approach, y: Approach| -> Option<f64> {
        let v: Vec<f64> = p
            .sizes
            .iter()
            .filter_map(|b| Some(r.get(x, 1, *b)?.tps / r.get(y, 1, *b)?.tps))
            .collect();
        (!v.is_empty()).then(|| mean(&v))
    };
    for (id, x, y, paper) in [
        ("F10.1", Approach::CcNvmeAtomic, Approach::Classic, 3.0),
        ("F10.1", Approach::CcNvmeAtomic, Approach::Horae, 2.2),
        ("F10.2", Approach::CcNvme, Approach::Classic, 1.5),
        ("F10.2", Approach::CcNvme, Approach::Horae, 1.2),
    ] {
        if let Some(v) = avg(x, y) {
            let claim = format!("1 core: {} / {} TPS, mean over sizes", x.name(), y.name());
            c.push(Check::new(id, claim, Kind::Times, paper, v));
        }
    }
    for (a, paper) in [
        (Approach::Classic, 62.0),
        (Approach::Horae, 63.0),
        (Approach::CcNvme, 93.0),
    ] {
        if let Some(x) = r.get(a, 1, 16) {
            let claim = format!("1 core, 64 KiB transactions: {} I/O utilization", a.name());
            c.push(Check::new(
                "F10.3",
                claim,
                Kind::SharePct,
                paper,
                x.utilization * 100.0,
            ));
        }
    }
    if let Some(&most) = p.threads.iter().max() {
        let sat = |a| saturating_threads(r, p, a);
        let atomic = sat(Approach::CcNvmeAtomic).map_or(0.0, |t| t as f64);
        c.push(Check::new(
            "F10.4",
            format!("4 KiB: threads ccnvme-atomic needs for 90% of the bandwidth (0: not within {most})"),
            Kind::Count,
            2.0,
            atomic,
        ));
        let others = [Approach::Classic, Approach::Horae, Approach::CcNvme];
        c.push(Check::holds(
            "F10.4",
            "4 KiB: classic, horae and ccnvme need at least 8 threads for 90% of the bandwidth",
            others.iter().all(|a| sat(*a).is_none_or(|t| t >= 8)),
        ));
        if most > 8 {
            for other in [Approach::Classic, Approach::Horae] {
                if let (Some(m), Some(o)) = (r.get(Approach::CcNvme, most, 1), r.get(other, most, 1)) {
                    let claim = format!("{most} threads, 4 KiB: ccnvme TPS over {}", other.name());
                    let more = if o.tps > 0.0 {
                        (m.tps / o.tps - 1.0) * 100.0
                    } else {
                        0.0
                    };
                    c.push(Check::new("F10.5", claim, Kind::MorePct, 50.0, more));
                }
            }
        }
    }
    c
}

fn table(r: &Results) -> Table {
    let mut t = Table::new(&["approach", "threads", "tx_kib", "tps", "utilization_pct"]);
    for p in &r.points {
        t.push(vec![
            p.approach.name().into(),
            p.threads.to_string(),
            (p.blocks * 4).to_string(),
            f(p.r.tps, 0),
            f(p.r.utilization * 100.0, 1),
        ]);
    }
    t
}

fn plot(r: &Results, p: &Params) -> Plot {
    let lines = |xs: &[usize], key: &dyn Fn(usize) -> (usize, usize), y: &dyn Fn(TxResult) -> f64| {
        Approach::ALL
            .iter()
            .map(|a| Series {
                name: a.name().into(),
                points: xs
                    .iter()
                    .filter_map(|x| {
                        let (t, b) = key(*x);
                        Some((*x as f64, y(r.get(*a, t, b)?)))
                    })
                    .collect(),
                bars: None,
            })
            .collect::<Vec<_>>()
    };
    let by_size = |x: usize| (1, x);
    let by_threads = |x: usize| (x, 1);
    let ktps = |x: TxResult| x.tps / 1e3;
    let util = |x: TxResult| x.utilization * 100.0;
    let panel = |title: &str, x: &str, y: &str, series| Panel::Lines {
        title: title.into(),
        x: x.into(),
        y: y.into(),
        series,
    };
    Plot {
        stem: "fig10".into(),
        title: "Figure 10: atomic transactions on the P5800X (simulated)".into(),
        panels: vec![
            panel(
                "(a) 1 core: throughput",
                "blocks per transaction",
                "K TPS",
                lines(&p.sizes, &by_size, &ktps),
            ),
            panel(
                "(b) 1 core: I/O utilization",
                "blocks per transaction",
                "%",
                lines(&p.sizes, &by_size, &util),
            ),
            panel(
                "(c) 4 KiB: throughput",
                "threads",
                "K TPS",
                lines(&p.threads, &by_threads, &ktps),
            ),
            panel(
                "(d) 4 KiB: I/O utilization",
                "threads",
                "%",
                lines(&p.threads, &by_threads, &util),
            ),
        ],
        cols: 2,
    }
}

/// The analysis: where the one-core approaches spend their time, from the
/// sweep's own measurements and one side experiment (the ordering queue's
/// entries persisted one by one, `docs/decisions.md` H1).
fn notes(r: &Results, p: &Params) -> BenchResult<Vec<String>> {
    let (Some(&small), Some(&large)) = (p.sizes.iter().min(), p.sizes.iter().max()) else {
        return Ok(Vec::new());
    };
    let at = |a: Approach, b: usize| r.get(a, 1, b);
    let (Some(c1), Some(h1), Some(n1), Some(cl), Some(hl), Some(nl)) = (
        at(Approach::Classic, small),
        at(Approach::Horae, small),
        at(Approach::CcNvme, small),
        at(Approach::Classic, large),
        at(Approach::Horae, large),
        at(Approach::CcNvme, large),
    ) else {
        return Ok(Vec::new());
    };
    let ssd = SsdProfile::optane_p5800x();
    let per_entry = DriverProfile {
        horae_entry_persist: EntryPersist::PerEntry,
        ..DriverProfile::default()
    };
    let pe_small = run_with(&ssd, &per_entry, Approach::Horae, 1, small, p.duration)?;
    let pe_large = run_with(&ssd, &per_entry, Approach::Horae, 1, large, p.duration)?;
    // Side experiment: the ordering queue's writes without the read that
    // ends them, as HoRAE's released module flushes (decisions H18).
    let mut released = DriverProfile::default();
    released.faults.no_flush_read = true;
    let nr_small = run_with(&ssd, &released, Approach::Horae, 1, small, p.duration)?;
    let nr_large = run_with(&ssd, &released, Approach::Horae, 1, large, p.duration)?;
    let pct = |x: f64| x * 100.0;
    let mut n = Vec::new();
    n.push(format!(
        "**Horae is bound by its one core (F10.1, F10.2 and F10.5 against Horae, F10.3 Horae).** On \
         one core the core is occupied {:.0}% of the time with Horae at {} KiB and {:.0}% at {} KiB, \
         against {:.0}% / {:.0}% with classic and {:.0}% / {:.0}% with ccNVMe (the machine's CPU \
         accounting). Per transaction Horae makes {:.1} and {:.1} persistent MMIO writes to the \
         ordering queue (an entry burst and a tail per epoch, `flushed`, and, on this drive without \
         a volatile cache, one `dr` word per completed write, Horae 5.3), each ending in a \
         zero-length read that stalls the core, besides the ordering layer's 0.7 us per write \
         (Horae 6.2); the `dr` words are written on the core that takes the completion, which is \
         the submitting core. Side experiment: with every entry its own persistent write (the \
         paper-literal reading of Horae 5.5, `EntryPersist::PerEntry`, `docs/decisions.md` H1) \
         Horae makes {:.0} TPS at {} KiB and {:.0} at {} KiB, against {:.0} and {:.0} with one \
         burst per epoch: its throughput follows the number of those writes. So Horae runs at \
         {:.2}x classic's throughput at {} KiB and {:.2}x at {} KiB, where the paper's ratios \
         (ccNVMe 1.5x classic and 1.2x Horae) put it at 1.25x: the paper's Horae pays less per \
         persistent write or per completion than the model's, which charges each zero-length \
         read its round trip on the link (Horae 5.2: an 8-byte read costs 0.9 us).",
        pct(h1.busy),
        small * 4,
        pct(hl.busy),
        large * 4,
        pct(c1.busy),
        pct(cl.busy),
        pct(n1.busy),
        pct(nl.busy),
        h1.ordering_writes_per_tx,
        hl.ordering_writes_per_tx,
        pe_small.tps,
        small * 4,
        pe_large.tps,
        large * 4,
        h1.tps,
        hl.tps,
        h1.tps / c1.tps,
        small * 4,
        hl.tps / cl.tps,
        large * 4,
    ));
    n.push(format!(
        "**What closes the Horae gap, and what it costs (F10.1, F10.2).** HoRAE's released \
         ordering-layer module ends each persistent write with `memcpy_fromio` of 0 bytes after its \
         `clflush`es and `mfence`, and a copy of no bytes makes no access on x86 Linux: the read of \
         Horae 5.5 never reaches the bus (`docs/decisions.md` H18). Side experiment, the same runs \
         without that read (`DriverFaults::no_flush_read`): Horae makes {:.0} TPS at {} KiB and \
         {:.0} at {} KiB (with the read {:.0} and {:.0}), so ccNVMe / Horae is {:.2}x and {:.2}x \
         (mean of the two {:.2}x; paper 1.2x) and ccNVMe-atomic / Horae {:.2}x (mean of the two; \
         paper 2.2x). The read is the cause of the gap, by measurement. It stays in the model \
         because without it Horae is not crash-consistent: a caller is told its writes are durable \
         while the ordering-queue writes that make them so (a tail, the `dr` words, `flushed`) may \
         still be on the link, and crashfuzz finds fsynced data lost (the self-check \
         `create_delete:horae+no-flush-read`; `crashfuzz -m horae --fault no-flush-read`).",
        nr_small.tps,
        small * 4,
        nr_large.tps,
        large * 4,
        h1.tps,
        hl.tps,
        n1.tps / nr_small.tps,
        nl.tps / nr_large.tps,
        (n1.tps / nr_small.tps + nl.tps / nr_large.tps) / 2.0,
        {
            let a = |b| r.get(Approach::CcNvmeAtomic, 1, b).map_or(0.0, |x| x.tps);
            (a(small) / nr_small.tps + a(large) / nr_large.tps) / 2.0
        },
    ));
    // Side experiment: the same drive with 64 media units (same program
    // time, link and latency): what the media's unit queues cost.
    let wide = SsdProfile {
        units: 64,
        ..ssd.clone()
    };
    let wide_c = run_with(
        &wide,
        &DriverProfile::default(),
        Approach::Classic,
        1,
        large,
        p.duration,
    )?;
    let wide_n = run_with(
        &wide,
        &DriverProfile::default(),
        Approach::CcNvme,
        1,
        large,
        p.duration,
    )?;
    n.push(format!(
        "**One core does not fill the link with {} KiB transactions (F10.3).** Classic, Horae and \
         ccNVMe use {:.0}%, {:.0}% and {:.0}% of 3.3 GB/s (paper: 62%, 63%, 93%) while their core is \
         occupied {:.0}%, {:.0}% and {:.0}% of the time. A ccNVMe transaction of {} requests takes \
         {:.0} us here, where the paper's utilization implies about {:.0} us. Side experiment: on \
         the same drive with 64 media units instead of {} (same program time, link and latency) \
         classic uses {:.0}% and ccNVMe {:.0}% ({:.0} us per transaction): the queues of the {} \
         random blocks for the model's {} units (each block goes to the unit free first, {:.1} us each; \
         `SsdProfile::units` is the drive's random-write IOPS times its program time) account for \
         that part of ccNVMe's gap; the rest, and classic's, is the one core's per-request work \
         (block layer 1.0 us, Horae 6.2; the driver's submission; an interrupt handler, 1.0 us; a \
         wake-up, 2 us; all named `DriverProfile` fields) and the waits between a transaction's \
         phases, during which the drive idles.",
        large * 4,
        pct(cl.utilization),
        pct(hl.utilization),
        pct(nl.utilization),
        pct(cl.busy),
        pct(hl.busy),
        pct(nl.busy),
        large + 1,
        1e6 / nl.tps.max(1.0),
        (large as f64 + 1.0) * 4096.0 / (0.93 * MAX_BANDWIDTH) * 1e6,
        ssd.units,
        pct(wide_c.utilization),
        pct(wide_n.utilization),
        1e6 / wide_n.tps.max(1.0),
        large,
        ssd.units,
        ssd.program_time.as_secs_f64() * 1e6,
    ));
    // Side experiment: ccNVMe without the read too. The ccNVMe paper's
    // released driver persists its P-SQ with the same flush as HoRAE's,
    // which makes no read (decisions H18): what the read costs F10.3 and
    // F10.4.
    let nr_cc = run_with(&ssd, &released, Approach::CcNvme, 1, large, p.duration)?;
    let mut nr_sat = None;
    for &t in &p.threads {
        let x = run_with(&ssd, &released, Approach::CcNvmeAtomic, t, 1, p.duration)?;
        if x.utilization >= 0.9 {
            nr_sat = Some(t);
            break;
        }
    }
    let sat = |x: Option<usize>| x.map_or_else(|| format!("none of {:?}", p.threads), |t| t.to_string());
    n.push(format!(
        "**Without the read, ccNVMe too (F10.3, F10.4).** The ccNVMe paper's released driver \
         persists its P-SQ entries and doorbell with the same flush as HoRAE's module, which makes \
         no read (`docs/decisions.md` H18). Side experiment, its writes without the read as well \
         (`DriverFaults::no_flush_read`, the one change): one core's ccNVMe transactions of {} KiB \
         use {:.0}% of the bandwidth (with the read {:.0}%, paper 93%), and ccnvme-atomic reaches 90% \
         of it at 4 KiB with {} thread(s) (with the read {}; paper 2).",
        large * 4,
        pct(nr_cc.utilization),
        pct(nl.utilization),
        sat(nr_sat),
        sat(saturating_threads(r, p, Approach::CcNvmeAtomic)),
    ));
    Ok(n)
}

/// Runs Figure 10 and lays out its outputs.
pub fn figure(p: &Params) -> BenchResult<(Results, FigureOut)> {
    let r = run(p)?;
    let notes = notes(&r, p)?;
    let out = FigureOut {
        title: "Figure 10: atomic transactions (block device, P5800X)".into(),
        setup: format!(
            "Each thread runs transactions of random 4 KiB blocks back to back on its own core: \
             classic (descriptor and blocks, wait, commit record with PREFLUSH and FUA), Horae (two \
             epochs of the ordering queue, one joint flush), ccNVMe (one transaction, wait for \
             durability), ccNVMe-atomic (return once atomic). Sizes {:?} blocks on one thread; \
             threads {:?} with one block; {} ms per point (simulated). Utilization is the bytes the \
             device fetched per second over {:.1} GB/s (the paper's `DEV_MAX_BW`).",
            p.sizes,
            p.threads,
            p.duration.as_secs_f64() * 1e3,
            MAX_BANDWIDTH / 1e9,
        ),
        csv: vec![("fig10".into(), table(&r))],
        shown: Vec::new(),
        plots: vec![plot(&r, p)],
        checks: checks(&r, p),
        notes,
    };
    Ok((r, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(approach: Approach, threads: usize, tps: f64, utilization: f64) -> Point {
        Point {
            approach,
            threads,
            blocks: 1,
            r: TxResult {
                tps,
                utilization,
                busy: 0.0,
                ordering_writes_per_tx: 0.0,
            },
        }
    }

    #[test]
    fn saturation_is_the_first_thread_count_at_90_percent() {
        let p = Params {
            sizes: vec![],
            threads: vec![1, 2, 8, 12],
            duration: SimDuration::from_ms(1),
        };
        let mut r = Results::default();
        for (t, u) in [(1, 0.5), (2, 0.95), (8, 1.0), (12, 1.0)] {
            r.points.push(point(Approach::CcNvmeAtomic, t, 1.0, u));
        }
        for a in [Approach::Classic, Approach::Horae, Approach::CcNvme] {
            for (t, u) in [(1, 0.1), (2, 0.2), (8, 0.92), (12, 0.95)] {
                r.points
                    .push(point(a, t, if a == Approach::CcNvme { 3.0 } else { 2.0 }, u));
            }
        }
        let c = checks(&r, &p);
        let f104: Vec<&Check> = c.iter().filter(|c| c.id == "F10.4").collect();
        assert_eq!(f104.len(), 2);
        assert!(f104.iter().all(|c| c.agrees()), "{f104:?}");
        let f105: Vec<&Check> = c.iter().filter(|c| c.id == "F10.5").collect();
        assert_eq!(f105.len(), 2);
        assert!(f105.iter().all(|c| c.agrees() && c.measured == 50.0), "{f105:?}");
        // One approach saturating at 2 threads breaks the trend.
        r.points
            .retain(|q| !(q.approach == Approach::Classic && q.threads == 2));
        r.points.push(point(Approach::Classic, 2, 2.0, 0.91));
        assert!(!checks(&r, &p).iter().any(|c| c.kind == Kind::Holds && c.agrees()));
    }
}
