//! The paper's performance figures (ccNVMe SOSP '21, Figures 2, 5 and 10 to 14) in
//! simulated time: `cargo bench -p ccnvme-bench --bench figures` writes a CSV
//! and an SVG plot per figure and `report.md` (the paper's claims beside the
//! measured values, and the analysis) under `target/figures/`.
//! `BENCH_QUICK=1` runs a small sweep in seconds, for CI smoke runs.

use std::process::ExitCode;
use std::time::Instant;

use ccnvme_bench::figures::{run_all, Options};

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and a filter, if any); nothing to parse.
    let opts = Options::from_env();
    let wall = Instant::now();
    match run_all(&opts) {
        Ok(s) => {
            println!(
                "figures: {} of {} claims agree; HoRAE: {} of {}; persistent memory: {} of {}; report {} ({:.1} s wall)",
                s.agreeing,
                s.claims,
                s.horae_agreeing,
                s.horae_claims,
                s.pm_agreeing,
                s.pm_claims,
                s.report.display(),
                wall.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("figures: {e}");
            ExitCode::FAILURE
        }
    }
}
