//! Simulated time of PMFS operations on the Optane model, split by the
//! journal's phases from the PM trace: the prelude (the inodes a lookup
//! checks and the lines the transaction logs, loaded from the persistent
//! memory; names come from the DRAM dentry cache), the undo log
//! (its stores, flushes and fence), the in-place update, and the commit.
//! The log and the commit are the synchronous journaling overhead; each
//! of the three fences waits for at least one write to the write pending
//! queue.

mod common;

use common::{Env, CTX};
use fsapi::FileSystem as _;
use pcie_sim::{PmEventKind, SimDuration};
use pmfs::{Faults, Pmfs};

/// One operation's time by phase.
#[derive(Debug)]
struct Phases {
    name: &'static str,
    total: SimDuration,
    prelude: SimDuration,
    log: SimDuration,
    in_place: SimDuration,
    commit: SimDuration,
}

impl Phases {
    /// The log and the commit in the whole operation.
    fn journaling_share(&self) -> f64 {
        (self.log + self.commit).as_ns_f64() / self.total.as_ns_f64()
    }

    /// The log and the commit in the persistence path (log, in place,
    /// commit: what the operation writes).
    fn journaling_share_of_writes(&self) -> f64 {
        let writes = self.log + self.in_place + self.commit;
        (self.log + self.commit).as_ns_f64() / writes.as_ns_f64()
    }
}

#[test]
fn a_metadata_operation_waits_at_three_fences_and_the_journal_is_most_of_its_writes() {
    let env = Env::formatted(21);
    let sim = env.m.sim();
    let write_latency = env.pm.profile().timing.write_latency;
    let pm = env.pm.clone();
    let phases = env
        .run(Faults::default(), move |fs: Pmfs| async move {
            let mut out = Vec::new();
            fs.mkdir_path(CTX, "/d").await?;
            fs.create_path(CTX, "/d/warm").await?;
            fs.create_path(CTX, "/d/x").await?;
            for name in ["create", "unlink", "link", "rename"] {
                let (t0, from) = (sim.now(), pm.trace().entries().len());
                match name {
                    "create" => fs.create_path(CTX, "/d/a").await.map(drop)?,
                    "unlink" => fs.unlink_path(CTX, "/d/warm").await?,
                    "link" => fs.link_path(CTX, "/d/a", "/d/b").await.map(drop)?,
                    _ => fs.rename_path(CTX, "/d/x", "/d/y").await?,
                }
                let t_end = sim.now();
                let trace = pm.trace();
                let e = &trace.entries()[from..];
                let first_store = e.iter().find(|e| e.kind == PmEventKind::Store).map(|e| e.time);
                let fences: Vec<_> = e
                    .iter()
                    .filter(|e| e.kind == PmEventKind::Sfence)
                    .map(|e| e.time)
                    .collect();
                assert_eq!(fences.len(), 3, "{name}");
                let first = first_store.unwrap_or(t0);
                out.push(Phases {
                    name,
                    total: t_end.since(t0),
                    prelude: first.since(t0),
                    log: fences[0].since(first),
                    in_place: fences[1].since(fences[0]),
                    commit: fences[2].since(fences[1]),
                });
            }
            Ok(out)
        })
        .unwrap();
    eprintln!("op | total ns | prelude | log | in place | commit | log+commit of total | of writes");
    for p in &phases {
        eprintln!(
            "{} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0}% | {:.0}%",
            p.name,
            p.total.as_ns_f64(),
            p.prelude.as_ns_f64(),
            p.log.as_ns_f64(),
            p.in_place.as_ns_f64(),
            p.commit.as_ns_f64(),
            100.0 * p.journaling_share(),
            100.0 * p.journaling_share_of_writes()
        );
        assert!(p.total >= write_latency * 3, "{}: three ordering points", p.name);
        for d in [p.log, p.in_place, p.commit] {
            assert!(d >= write_latency, "{}: each fence waits for a write", p.name);
        }
        // Two of the three ordering points are the journal's.
        assert!(p.journaling_share_of_writes() > 0.5, "{p:?}");
    }
}

/// PMFS's linear directory: a create examines the directory's slots in
/// order until a free one, so its CPU time grows with the entries before
/// it (SoupFS 4.2); with the cost table zeroed the growth is gone.
#[test]
fn a_create_pays_for_every_slot_before_the_free_one() {
    use fsapi::CpuCosts;
    use pmfs::Options;
    let grows = |cpu: CpuCosts| {
        let env = Env::formatted(5);
        let (m, pm, sim) = (env.m.clone(), env.pm.clone(), env.m.sim());
        env.ex
            .block_on(async move {
                let fs = Pmfs::mount_with(
                    &m,
                    &pm,
                    CTX,
                    Options {
                        cpu,
                        ..Options::default()
                    },
                )
                .await?;
                let mut took = Vec::new();
                for i in 0..40 {
                    let t0 = sim.now();
                    fs.create_path(CTX, &format!("/f{i}")).await?;
                    took.push(sim.now().since(t0));
                }
                Ok::<_, pmfs::PmfsError>(took)
            })
            .unwrap()
            .unwrap()
    };
    let with = grows(CpuCosts::default());
    let bare = grows(CpuCosts::none());
    let slot = pcie_sim::Frequency::from_mhz(2_500).time_of(CpuCosts::default().dirent_cycles);
    // The 40th create examines 38 used slots more than the second (both
    // in the root's first directory block, which the first create added);
    // the persistent-memory part does not grow with them.
    let extra = |t: &[SimDuration]| t[39].as_ns_f64() - t[1].as_ns_f64();
    eprintln!(
        "40th create over the second: {:.0} ns with CPU, {:.0} ns without",
        extra(&with),
        extra(&bare)
    );
    let grown = extra(&with) - extra(&bare);
    assert!((grown - 38.0 * slot.as_ns_f64()).abs() < 2.0, "{grown:.0} ns");
}
