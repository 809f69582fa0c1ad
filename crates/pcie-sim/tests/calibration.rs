//! The PMR calibration of ccNVMe Figure 5 and Horae 5.2 holds in simulated time.

use pcie_sim::calibration::{figure5, mmio_read};
use pcie_sim::MachineProfile;

#[test]
fn persistent_64_byte_write_costs_about_2_5x_a_plain_one() {
    let rows = figure5(&MachineProfile::default()).unwrap();
    let r64 = rows.iter().find(|r| r.size == 64).unwrap();
    assert!((r64.ratio() - 2.5).abs() < 0.1, "64 B ratio {}", r64.ratio());
    // From 512-byte bursts up the two approach each other: the ratio falls
    // monotonically and ends close to 1.
    let big: Vec<f64> = rows.iter().filter(|r| r.size >= 512).map(|r| r.ratio()).collect();
    assert!(big[0] < 1.5, "512 B ratio {}", big[0]);
    assert!(big.windows(2).all(|w| w[1] <= w[0]));
    assert!(*big.last().unwrap() < 1.05);
}

#[test]
fn mmio_reads_match_horae() {
    let p = MachineProfile::default();
    let r8 = mmio_read(&p, 8).unwrap().as_us_f64();
    let r4k = mmio_read(&p, 4096).unwrap().as_us_f64();
    assert!((r8 - 0.9).abs() / 0.9 < 0.05, "8 B read {r8} us");
    assert!((r4k - 113.0).abs() / 113.0 < 0.05, "4 KiB read {r4k} us");
}
