//! ccNVMe Figure 10 in simulated time on the P5800X profile: atomic
//! transactions per second and bandwidth utilization for the classic,
//! Horae, ccNVMe and ccNVMe-atomic approaches, by transaction size (one
//! thread) and by thread count (4 KiB transactions). Prints the measured
//! ratios beside the paper's claims. `FIG10_QUICK=1` runs a small sweep.

mod txbench;

use nvme_ctrl::SsdProfile;
use pcie_sim::SimDuration;
use txbench::{run, Approach, TxResult};

fn measure(p: &SsdProfile, a: Approach, threads: usize, blocks: usize, d: SimDuration) -> TxResult {
    run(p, a, threads, blocks, d).unwrap_or_else(|e| panic!("{} x{threads} {blocks} blocks: {e}", a.name()))
}

fn main() {
    let quick = std::env::var("FIG10_QUICK").is_ok();
    let p = SsdProfile::optane_p5800x();
    let d = SimDuration::from_ms(if quick { 1 } else { 4 });
    let sizes: &[usize] = if quick { &[1, 16] } else { &[1, 2, 4, 8, 16] };
    let threads: &[usize] = if quick {
        &[1, 2, 8]
    } else {
        &[1, 2, 4, 6, 8, 10, 12]
    };

    println!("## Figure 10(a,b): one thread, transaction size\n");
    println!("| size | classic KTPS | horae KTPS | ccnvme KTPS | ccnvme-atomic KTPS | util classic | util horae | util ccnvme | util atomic |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut single: Vec<[TxResult; 4]> = Vec::new();
    for &b in sizes {
        let r = Approach::ALL.map(|a| measure(&p, a, 1, b, d));
        println!("{}", row(&format!("{} KiB", b * 4), &r));
        single.push(r);
    }
    let avg =
        |i: usize, j: usize| single.iter().map(|r| r[i].tps / r[j].tps).sum::<f64>() / single.len() as f64;
    println!("\nSingle core, averaged over sizes (paper 7.2):");
    println!("- ccNVMe-atomic / classic = {:.2}x (paper: 3x)", avg(3, 0));
    println!("- ccNVMe-atomic / Horae   = {:.2}x (paper: 2.2x)", avg(3, 1));
    println!("- ccNVMe / classic        = {:.2}x (paper: 1.5x)", avg(2, 0));
    println!("- ccNVMe / Horae          = {:.2}x (paper: 1.2x)", avg(2, 1));

    println!("\n## Figure 10(c,d): 4 KiB transactions, threads\n");
    println!("| threads | classic KTPS | horae KTPS | ccnvme KTPS | ccnvme-atomic KTPS | util classic | util horae | util ccnvme | util atomic |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut saturate = [None; 4];
    for &t in threads {
        let r = Approach::ALL.map(|a| measure(&p, a, t, 1, d));
        println!("{}", row(&t.to_string(), &r));
        for (i, x) in r.iter().enumerate() {
            if saturate[i].is_none() && x.utilization >= 0.9 {
                saturate[i] = Some(t);
            }
        }
    }
    println!("\nThreads to reach 90% of the bandwidth (paper: ccNVMe-atomic 2, the others about 8):");
    for (i, a) in Approach::ALL.iter().enumerate() {
        match saturate[i] {
            Some(t) => println!("- {}: {t}", a.name()),
            None => println!("- {}: not reached", a.name()),
        }
    }
}

/// A table row: the label, each approach's KTPS, then its utilization.
fn row(label: &str, r: &[TxResult; 4]) -> String {
    let tps: Vec<String> = r.iter().map(|x| format!("{:.1}", x.tps / 1e3)).collect();
    let util: Vec<String> = r
        .iter()
        .map(|x| format!("{:.0}%", x.utilization * 100.0))
        .collect();
    format!("| {label} | {} | {} |", tps.join(" | "), util.join(" | "))
}
