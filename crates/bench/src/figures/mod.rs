//! The paper's performance figures (ccNVMe SOSP '21, Figures 2, 5 and 10
//! to 14) in
//! simulated time: each figure's workload on the modelled machine, its CSV
//! and SVG under `target/figures/`, and `report.md` with the paper's claims
//! beside the measured values and an analysis of the differences.
//!
//! Everything is deterministic: every machine runs on a seeded executor and
//! the workloads draw from seeded generators; wall-clock time only bounds
//! how much simulated time each point gets.

pub mod analysis;
pub mod append;
pub mod common;
pub mod diagnose;
pub mod fig02;
pub mod fig05;
pub mod fig10;
pub mod fig11;
pub mod fig12;
pub mod fig13;
pub mod fig14;
pub mod horae;
pub mod output;
pub mod pm;
pub mod report;
pub mod rocksdb;
pub mod txbench;
pub mod varmail;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use common::BenchResult;
use report::FigureOut;

/// How to run.
#[derive(Clone, Debug)]
pub struct Options {
    /// A small sweep for smoke tests (`BENCH_QUICK=1`).
    pub quick: bool,
    /// Where the files go.
    pub out_dir: PathBuf,
}

impl Options {
    /// From the environment: `BENCH_QUICK` set to anything but `0` or an
    /// empty string selects the quick sweep; output in
    /// [`output::figures_dir`].
    pub fn from_env() -> Options {
        let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        Options {
            quick,
            out_dir: output::figures_dir(),
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Path of the report.
    pub report: PathBuf,
    /// Claims compared.
    pub claims: usize,
    /// Claims within tolerance.
    pub agreeing: usize,
    /// HoRAE's own claims compared (counted apart, [`horae`]).
    pub horae_claims: usize,
    /// Of those, within tolerance.
    pub horae_agreeing: usize,
    /// The persistent-memory file systems' claims compared (counted
    /// apart, [`pm`]).
    pub pm_claims: usize,
    /// Of those, within tolerance.
    pub pm_agreeing: usize,
}

/// Known limits of the model that the figures depend on, stated once at the
/// top of the report.
const MODEL_NOTES: &str = "\
- One seeded simulation per point; each benchmark thread runs on its own simulated core, plus one \
  spare core for the journal commit thread of Ext4 and HoraeFS (the paper's 24-core server had idle \
  cores below 24 threads).
- CPU costs are the profiles' named figures (system call, block layer, ordering layer, interrupt, \
  wake-up, page preparation...); lock contention and cache effects are not modelled; the \
  `classic` and `horae` journals make a modifier wait for a buffer under log I/O (JBD2's BH_Shadow \
  wait, `FsProfile::jbd_shadow`).
- The FIO workloads (Figures 2, 11 and 13) lay their files out as FIO does by default: created and \
  preallocated with fallocate(2) before the run (`filesetup.c` `extend_file`, `fallocate=native`), \
  so an append converts unwritten blocks and allocates nothing; HoRAE's \"allocating write \
  workload\" (its Figure 10) is `fallocate=none`. Figure 11's notes measure both.
- The numbers depend on the simulator as built for this run; nothing here is tuned to the paper.
- Each thread appends to one file for the whole run, as each of the paper's FIO jobs writes one \
  file (`docs/decisions.md` B1); the threads' files are created together, so their inodes are \
  neighbours in the inode table.
- The drive models program each block on the media unit free first (a page-mapped FTL's write \
  point, `docs/decisions.md` D21); the 905P and P5800X profiles have no \
  volatile write cache, so FLUSH is dropped by the block layer, as on the paper's Optane drives.
- File timestamps come from the coarse clock, as Linux's `current_time` (4 ms ticks, HZ=250): an \
  overwrite within the tick of its file's last change dirties no inode, so its fsync commits no \
  transaction (`docs/decisions.md` M17); appends change the size and always do.
- Periodic writeback runs with Linux's defaults (wake every 5 s, write what has been dirty 30 s); \
  the measured windows last milliseconds, so it never fires in them: Ext4-NJ's bitmaps, which its \
  fsync does not write, stay dirty, as in a short run on Linux.";

/// The quick or the full sweep of a figure.
fn sweep<P>(quick: bool, small: fn() -> P, full: fn() -> P) -> P {
    if quick {
        small()
    } else {
        full()
    }
}

/// Runs every figure, writes the CSVs, plots and `report.md`.
pub fn run_all(o: &Options) -> BenchResult<Summary> {
    std::fs::create_dir_all(&o.out_dir)?;
    let wall = Instant::now();
    let q = o.quick;
    let p02 = sweep(q, fig02::Params::quick, fig02::Params::full);
    let p10 = sweep(q, fig10::Params::quick, fig10::Params::full);
    let p11 = sweep(q, fig11::Params::quick, fig11::Params::full);
    let p12 = sweep(q, fig12::Params::quick, fig12::Params::full);
    let p13 = sweep(q, fig13::Params::quick, fig13::Params::full);
    let p14 = sweep(q, fig14::Params::quick, fig14::Params::full);
    let ph = sweep(q, horae::Params::quick, horae::Params::full);
    let ppm = sweep(q, pm::Params::quick, pm::Params::full);
    let diag = diagnose::run(q, &p11)?;
    let (_, f02) = fig02::figure(&p02)?;
    let (_, f05) = fig05::figure()?;
    let (_, f10) = fig10::figure(&p10)?;
    let (r11, mut f11) = fig11::figure(&p11)?;
    f11.notes = analysis::fig11(&r11, &p11, &diag);
    let (r12, mut f12) = fig12::figure(&p12)?;
    let sides = fig12::SideRuns::run(&p12)?;
    f12.notes = analysis::fig12(&r12, &sides, &diag);
    let (r13, mut f13) = fig13::figure(&p13)?;
    f13.notes = analysis::fig13(&r13, &p13);
    let (r14, mut f14) = fig14::figure(&p14)?;
    f14.notes = analysis::fig14(&r14, &diag, &r11);
    let (_, fh) = horae::figure(&ph)?;
    let (_, fpm) = pm::figure(&ppm)?;
    let figures = [f02, f05, f10, f11, f12, f13, f14];
    let mut sections = String::new();
    for f in &figures {
        sections.push_str(&f.write(&o.out_dir)?);
    }
    let claims: Vec<&report::Check> = figures.iter().flat_map(|f: &FigureOut| f.checks.iter()).collect();
    let agreeing = claims.iter().filter(|c| c.agrees()).count();
    let horae_sections = [fh];
    let horae_claims: Vec<&report::Check> = horae_sections.iter().flat_map(|f| f.checks.iter()).collect();
    let horae_agreeing = horae_claims.iter().filter(|c| c.agrees()).count();
    let mut md = String::new();
    let _ = writeln!(md, "# ccNVMe / MQFS figures in simulated time\n");
    let _ = writeln!(
        md,
        "Generated by `cargo bench -p ccnvme-bench --bench figures`{} in {:.0} s of wall time. \
         Every number below is measured by the simulation in this run; the paper's are quoted beside \
         them. A claim agrees when the measured ratio is within 15% of the paper's (or within 10 \
         points for percentages). {} of {} claims agree.\n",
        if q {
            " (BENCH_QUICK: small sweep, not for conclusions)"
        } else {
            ""
        },
        wall.elapsed().as_secs_f64(),
        agreeing,
        claims.len()
    );
    let _ = writeln!(md, "## The model\n\n{MODEL_NOTES}\n");
    md.push_str(&sections);
    let _ = writeln!(md, "# HoRAE (OSDI '20)\n");
    let _ = writeln!(
        md,
        "HoRAE's own claims (its section 6; ids H5-H12 as the paper's claims are numbered), measured on the \
         same simulator with the same profiles and counted apart from the ccNVMe paper's: {} of {} \
         agree (same tolerances). A claim the model cannot measure is listed in the notes with the \
         reason.\n",
        horae_agreeing,
        horae_claims.len()
    );
    for f in &horae_sections {
        md.push_str(&f.write(&o.out_dir)?);
    }
    let pm_sections = [fpm];
    let pm_claims: Vec<&report::Check> = pm_sections.iter().flat_map(|f| f.checks.iter()).collect();
    let pm_agreeing = pm_claims.iter().filter(|c| c.agrees()).count();
    let _ = writeln!(md, "# Persistent memory (WOFS, SoupFS)\n");
    let _ = writeln!(
        md,
        "The claims of the file systems on persistent memory (ids W for the WOFS slides, S for \
         SoupFS, as the papers' results are numbered), measured on the memory-bus model and counted \
         apart: {} of {} agree (same tolerances).\n",
        pm_agreeing,
        pm_claims.len()
    );
    for f in &pm_sections {
        md.push_str(&f.write(&o.out_dir)?);
    }
    let report = o.out_dir.join("report.md");
    std::fs::write(&report, md)?;
    Ok(Summary {
        report,
        claims: claims.len(),
        agreeing,
        horae_claims: horae_claims.len(),
        horae_agreeing,
        pm_claims: pm_claims.len(),
        pm_agreeing,
    })
}
