//! Prints each profile's measured 4 KiB QD1 write latency, random write
//! IOPS and sequential write bandwidth beside its published figures
//! (ccNVMe Table 3), in simulated time.

use nvme_ctrl::measure::{link_write_bound, measure};
use nvme_ctrl::SsdProfile;

fn main() {
    println!(
        "| profile | QD1 write latency (us) | figure | rand write IOPS | figure | seq write (GB/s) | figure | bound (GB/s) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for p in SsdProfile::all() {
        let m = measure(&p);
        let media = p.units as f64 * 4096.0 / p.program_time.as_secs_f64();
        println!(
            "| {} | {:.2} | {:.1} | {:.0}K | {}K | {:.2} | {:.2} | {:.2} |",
            p.name,
            m.write_latency_us,
            p.figures.write_latency.as_us_f64(),
            m.rand_write_iops / 1e3,
            p.figures.rand_write_iops / 1000,
            m.seq_write_bps / 1e9,
            p.figures.seq_write_bps as f64 / 1e9,
            media.min(link_write_bound()) / 1e9
        );
    }
}
