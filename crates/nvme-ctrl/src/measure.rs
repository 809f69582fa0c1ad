//! Measures a profile the way the paper's Table 3 figures are measured:
//! 4 KiB random writes at queue depth 1 (latency) and at high queue depth
//! (IOPS), and 128 KiB sequential writes (bandwidth), in simulated time,
//! through the [`crate::testing::TestHost`] driver.

use pcie_sim::{Executor, LinkProfile, Machine, MachineProfile, SimTime, TraceMode};
use rand::Rng;

use crate::controller::{Controller, ControllerConfig};
use crate::media::Media;
use crate::profile::SsdProfile;
use crate::testing::TestHost;
use nvme_spec::command::SubmissionEntry;

/// Measurements of one profile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Mean 4 KiB write latency at queue depth 1, submission to completion.
    pub write_latency_us: f64,
    /// 4 KiB random writes per second at queue depth 128.
    pub rand_write_iops: f64,
    /// 128 KiB sequential writes at queue depth 32, bytes per second.
    pub seq_write_bps: f64,
}

/// Media size used by the measurements (1 GiB).
const BLOCKS: u64 = 1 << 18;

/// The most write bandwidth the default link carries: the device pulls the
/// data as completions of Max_Payload_Size bytes, each with a header and
/// framing.
pub fn link_write_bound() -> f64 {
    let l = LinkProfile::default();
    let per_tlp = (l.max_payload + l.header_bytes_32 + l.framing_bytes) as f64;
    l.bandwidth().bytes_per_sec as f64 * l.max_payload as f64 / per_tlp
}

fn setup(p: &SsdProfile) -> (Executor, Machine, TestHost) {
    let ex = Executor::new(3);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
    // The controller stays attached to the machine for the run.
    let _ctrl = Controller::attach(&m, ControllerConfig::new(p.clone()), Media::memory(BLOCKS), None);
    let host = TestHost::new(&m, 0, 0).expect("core 0 and port 0 exist");
    (ex, m, host)
}

/// Runs `commands` writes of `blocks` blocks each, keeping `depth` in
/// flight; LBAs random or sequential. Returns the elapsed time.
fn run(p: &SsdProfile, depth: usize, commands: usize, blocks: u32, random: bool) -> f64 {
    let (ex, m, host) = setup(p);
    let sim = m.sim();
    let mem = m.memory();
    let bytes = blocks as u64 * 4096;
    let (Ok(buf), Ok(list)) = (mem.alloc(bytes), mem.alloc(4096)) else {
        return f64::NAN;
    };
    for i in 1..blocks as u64 {
        let _ = mem.write(list + (i - 1) * 8, &(buf.0 + i * 4096).to_le_bytes());
    }
    let prp2 = match blocks {
        1 => 0,
        2 => buf.0 + 4096,
        _ => list.0,
    };
    let h = host.clone();
    let out = ex.block_on(async move {
        h.enable(32).await.ok()?;
        h.create_io_pair(1, (depth as u32 * 2).max(8)).await.ok()?;
        let start = sim.now();
        let mut next_lba = 0u64;
        let mut lba = |sim: &pcie_sim::Sim| {
            if random {
                sim.with_rng(|r| r.gen_range(0..BLOCKS / blocks as u64)) * blocks as u64
            } else {
                let l = next_lba;
                next_lba = (next_lba + blocks as u64) % BLOCKS;
                l
            }
        };
        let mut submitted = 0usize;
        let mut done = 0usize;
        while submitted < depth.min(commands) {
            let sqe = SubmissionEntry::write(0, 1, lba(&sim), blocks, buf.0, prp2, false);
            h.submit(1, sqe).await.ok()?;
            submitted += 1;
        }
        while done < commands {
            let c = h.wait_any(1).await.ok()?;
            if !c.status.is_success() {
                return None;
            }
            done += 1;
            if submitted < commands {
                let sqe = SubmissionEntry::write(0, 1, lba(&sim), blocks, buf.0, prp2, false);
                h.submit(1, sqe).await.ok()?;
                submitted += 1;
            }
        }
        Some(sim.now() - start)
    });
    match out {
        Ok(Some(d)) => d.as_secs_f64(),
        _ => f64::NAN,
    }
}

/// Measures `p`.
pub fn measure(p: &SsdProfile) -> Measured {
    let qd1 = 200;
    let lat = run(p, 1, qd1, 1, true) / qd1 as f64;
    let iops_cmds = 6_000;
    let iops = iops_cmds as f64 / run(p, 128, iops_cmds, 1, true);
    let seq_cmds = 600;
    let bps = seq_cmds as f64 * 131_072.0 / run(p, 32, seq_cmds, 32, false);
    let _ = SimTime::ZERO;
    Measured {
        write_latency_us: lat * 1e6,
        rand_write_iops: iops,
        seq_write_bps: bps,
    }
}
