//! Prints the PMR calibration: ccNVMe Figure 5 (persistent vs plain PMR
//! writes) and the MMIO read latencies Horae measured (Horae 5.2).

use pcie_sim::calibration::{figure5, mmio_read};
use pcie_sim::MachineProfile;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let profile = MachineProfile::default();
    println!(
        "PMR write latency (ccNVMe Figure 5), {} sequential writes each",
        pcie_sim::calibration::OPS
    );
    println!(
        "{:>8} {:>14} {:>18} {:>8}",
        "bytes", "write (us)", "write+sync (us)", "ratio"
    );
    for row in figure5(&profile)? {
        println!(
            "{:>8} {:>14.3} {:>18.3} {:>8.2}",
            row.size,
            row.write.as_us_f64(),
            row.persistent.as_us_f64(),
            row.ratio()
        );
    }
    println!("paper: 64 B write+sync = 2.5x write; the two converge above 512 B\n");
    println!("MMIO read latency (Horae 5.2)");
    for (size, paper) in [(8u64, 0.9), (4096, 113.0)] {
        let t = mmio_read(&profile, size)?;
        println!("{:>8} B: {:>8.3} us   (paper: {paper} us)", size, t.as_us_f64());
    }
    Ok(())
}
