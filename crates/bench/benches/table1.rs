//! ccNVMe Table 1 from the simulated machine's counters: for N = 1..=16
//! and every system, the critical-path MMIO, DMA(Q), Block I/O and IRQ
//! counts beside the paper's formulas, the Horae ordering-queue writes
//! apart, and TLPs and wire bytes for the critical path and the whole
//! transaction. Writes `table1.json` to the target directory and exits
//! non-zero if a paper-row count is off its formula. `BENCH_QUICK=1` runs
//! N = 1..=4 only.

use std::process::ExitCode;

use ccnvme_bench::table1::{self, Row};

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and filters); there is nothing to
    // filter here, so the arguments are ignored.
    let quick = std::env::var("BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let max_n = if quick { 4 } else { 16 };
    let rows = match table1::rows(1..=max_n) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("table1: {e}");
            return ExitCode::FAILURE;
        }
    };

    println!("# ccNVMe Table 1, measured (optane-905p, no merging, no volatile cache, one transaction in flight)\n");
    println!("{}", table1::render_summary(&rows));
    println!("\n## Per N{}", table1::render_detail(&rows));

    let path = ccnvme_bench::target_dir().join("table1.json");
    match write_json(&path, &rows) {
        Ok(()) => println!("\nwrote {}", path.display()),
        Err(e) => {
            eprintln!("table1: {e}");
            return ExitCode::FAILURE;
        }
    }

    let off: Vec<&Row> = rows.iter().filter(|r| r.in_paper && !r.ok()).collect();
    let off_derived: Vec<&Row> = rows.iter().filter(|r| !r.ok_derived()).collect();
    for r in &off_derived {
        println!(
            "note: {} N={} is off a derived (not paper) formula: critical {:?} vs {:?}, \
             total {:?} vs {:?}, ordering/flush reads {:?} vs {:?}",
            r.system,
            r.n,
            [r.mmio, r.dma_q, r.block_io, r.irq],
            r.expected,
            [r.mmio_total, r.dma_q_total, r.block_io_total, r.irq_total],
            r.expected_total,
            [r.ordering_mmio, r.flush_reads],
            r.expected_extra
        );
    }
    if off.is_empty() {
        println!(
            "every paper-row count equals its formula ({} rows, N = 1..={max_n})",
            rows.iter().filter(|r| r.in_paper).count()
        );
        ExitCode::SUCCESS
    } else {
        for r in &off {
            eprintln!(
                "MISMATCH: {} N={}: measured {:?}, paper {:?}",
                r.system,
                r.n,
                [r.mmio, r.dma_q, r.block_io, r.irq],
                r.expected
            );
        }
        ExitCode::FAILURE
    }
}

fn write_json(path: &std::path::Path, rows: &[Row]) -> Result<(), ccnvme_bench::Error> {
    let io = |source| ccnvme_bench::Error::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_string_pretty(rows)?;
    std::fs::write(path, text + "\n").map_err(io)
}
