//! Simulated time of WOFS operations on the Optane model: a metadata
//! operation's persistent-memory part costs about one write to the write
//! pending queue (its single ordering point), a write adds its data
//! pages; mount scans every slot; the CPU's share is one system call and
//! the DRAM work of each call.

mod common;

use common::{Env, CTX};
use fsapi::CpuCosts;
use fsapi::FileSystem as _;
use pcie_sim::{Pmem, SimDuration};
use wofs::{Faults, Options, Wofs};

/// The laps of the latency workload, mounted with `cpu`.
fn laps(cpu: CpuCosts) -> Vec<(&'static str, SimDuration)> {
    let env = Env::formatted(21);
    let sim = env.m.sim();
    let (m, pm) = (env.m.clone(), env.pm.clone());
    let options = Options {
        cpu,
        ..Options::default()
    };
    env.run(options, move |fs: Wofs| async move {
        let mut t = Vec::new();
        let mut at = sim.now();
        let mut lap = |name: &'static str, t: &mut Vec<(&'static str, SimDuration)>| {
            let now = sim.now();
            t.push((name, now.since(at)));
            at = now;
        };
        fs.create_path(CTX, "/warm").await?;
        lap("warm-up create", &mut t);
        fs.create_path(CTX, "/a").await?;
        lap("create", &mut t);
        fs.mkdir_path(CTX, "/d").await?;
        lap("mkdir", &mut t);
        fs.write_path(CTX, "/a", 0, &[1u8; 4096]).await?;
        lap("write 4 KiB", &mut t);
        fs.rename_path(CTX, "/a", "/d/b").await?;
        lap("rename", &mut t);
        fs.unlink_path(CTX, "/d/b").await?;
        lap("unlink", &mut t);
        // After a power failure the cache is cold: the scan reads every
        // slot from the media.
        let cold = Pmem::attach_with_image(&m, common::profile(), pm.persistent_image())?;
        Wofs::mount(&m, &cold, CTX, Faults::default()).await?;
        lap("mount after a power failure (scan of 64 slots, 16 KiB)", &mut t);
        Ok(t)
    })
    .unwrap()
}

#[test]
fn a_metadata_operation_costs_about_one_persist_and_mount_one_scan() {
    let env = Env::formatted(21);
    let write_latency = env.pm.profile().timing.write_latency;
    // The persistent-memory part alone: no CPU time charged.
    let times = laps(CpuCosts::none());
    for (name, d) in &times {
        eprintln!("{name}: {:.0} ns", d.as_ns_f64());
    }
    let get = |n: &str| times.iter().find(|t| t.0 == n).map(|t| t.1).unwrap();
    for op in ["create", "mkdir", "rename", "unlink"] {
        let d = get(op);
        assert!(d >= write_latency, "{op}: at least the persist");
        assert!(
            d < write_latency * 3,
            "{op}: one ordering point, {:.0} ns",
            d.as_ns_f64()
        );
    }
    assert!(get("write 4 KiB") > get("create"));
    let scan = get("mount after a power failure (scan of 64 slots, 16 KiB)");
    let per_line = env.pm.profile().timing.read_latency_sequential;
    assert!(scan >= per_line * 200, "a cold scan reads the 256 slot lines");
}

#[test]
fn each_call_adds_its_system_call_and_dram_work() {
    let bare = laps(CpuCosts::none());
    let full = laps(CpuCosts::default());
    let syscall = CpuCosts::default().syscall;
    for ((name, b), (_, f)) in bare.iter().zip(&full).take(6) {
        eprintln!("{name}: {:.0} ns -> {:.0} ns", b.as_ns_f64(), f.as_ns_f64());
        // One call through the trait: a path's lookups are calls of their
        // own (as mqfs charges them), so a call by path pays one or two.
        assert!(*f >= *b + syscall, "{name}: at least one system call more");
        assert!(
            *f <= *b + syscall * 3 + SimDuration::from_us(1),
            "{name}: at most the path's calls and a microsecond of DRAM work"
        );
    }
}
