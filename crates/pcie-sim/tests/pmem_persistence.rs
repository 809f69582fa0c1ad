//! Persistent memory on the memory bus: what survives a power failure
//! after each x86 persistence idiom, under ADR and eADR, by the crash
//! envelope computed from the recorded trace (`docs/persistence.md`,
//! "Persistent memory on the memory bus").

use std::future::Future;

use pcie_sim::{
    Core, Executor, Machine, MachineProfile, PageStore, PcieError, PersistenceDomain, PmAddr, PmEventKind,
    Pmem, PmemCursor, PmemProfile, Purpose, SimDuration, SimTime, TraceMode,
};

const SIZE: u64 = 64 << 10;

fn profile(domain: PersistenceDomain) -> PmemProfile {
    PmemProfile {
        size: SIZE,
        domain,
        ..PmemProfile::default()
    }
}

/// Runs `program` on core 0 of a fresh machine with persistent memory.
fn run<F, Fut>(domain: PersistenceDomain, seed: u64, program: F) -> (Machine, Pmem)
where
    F: FnOnce(Pmem, Core) -> Fut,
    Fut: Future<Output = Result<(), PcieError>> + 'static,
{
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach(&m, profile(domain)).unwrap();
    let core = m.core(0).unwrap();
    ex.block_on(program(pm.clone(), core)).unwrap().unwrap();
    (m, pm)
}

/// Every crash state after the last entry (all of them: the programs here
/// have few pending items).
fn final_states(pm: &Pmem) -> Vec<Vec<u8>> {
    let trace = pm.trace();
    let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), pm.profile().domain, 10).unwrap();
    cur.advance_past(cur.len() - 1).unwrap();
    let (choices, left) = cur.choices(16, 0);
    assert_eq!(left, 0, "bound large enough for every state");
    choices
        .iter()
        .map(|c| cur.materialize(c).unwrap().to_vec())
        .collect()
}

fn word(img: &[u8], addr: u64) -> u64 {
    let a = addr as usize;
    let mut b = [0u8; 8];
    b.copy_from_slice(&img[a..a + 8]);
    u64::from_le_bytes(b)
}

const A: PmAddr = PmAddr(0x1000);
const B: PmAddr = PmAddr(0x2000);

fn v(x: u64) -> [u8; 8] {
    x.to_le_bytes()
}

#[test]
fn a_store_without_clwb_and_sfence_may_be_lost_and_with_them_survives() {
    let (_, pm) = run(PersistenceDomain::Adr, 1, |pm, c| async move {
        pm.store(&c, A, &v(7), Purpose::UNTAGGED).await
    });
    let states = final_states(&pm);
    assert!(
        states.iter().any(|s| word(s, A.0) == 0),
        "a plain store may be lost"
    );
    assert!(
        states.iter().any(|s| word(s, A.0) == 7),
        "or may have been written back"
    );

    let (_, pm) = run(PersistenceDomain::Adr, 1, |pm, c| async move {
        pm.store(&c, A, &v(7), Purpose::UNTAGGED).await?;
        pm.clwb(&c, A).await?;
        pm.sfence(&c).await
    });
    assert!(final_states(&pm).iter().all(|s| word(s, A.0) == 7));
}

#[test]
fn clwb_without_sfence_is_not_ordered_before_a_later_store() {
    // A is the data, B the flag that says A is valid.
    let lost_a_with_b = |fence: bool| {
        let (_, pm) = run(PersistenceDomain::Adr, 2, move |pm, c| async move {
            pm.store(&c, A, &v(1), Purpose::UNTAGGED).await?;
            pm.clwb(&c, A).await?;
            if fence {
                pm.sfence(&c).await?;
            }
            pm.store(&c, B, &v(1), Purpose::UNTAGGED).await?;
            pm.clwb(&c, B).await
        });
        final_states(&pm)
            .iter()
            .any(|s| word(s, B.0) == 1 && word(s, A.0) == 0)
    };
    assert!(lost_a_with_b(false), "the flag may persist before the data");
    assert!(!lost_a_with_b(true), "the sfence orders the clwb before the flag");
}

#[test]
fn clflush_is_ordered_with_a_later_store_and_clflushopt_is_not() {
    let lost_a_with_b = |strong: bool| {
        let (_, pm) = run(PersistenceDomain::Adr, 3, move |pm, c| async move {
            pm.store(&c, A, &v(1), Purpose::UNTAGGED).await?;
            if strong {
                pm.clflush(&c, A).await?;
            } else {
                pm.clflushopt(&c, A).await?;
            }
            pm.store(&c, B, &v(1), Purpose::UNTAGGED).await
        });
        final_states(&pm)
            .iter()
            .any(|s| word(s, B.0) == 1 && word(s, A.0) == 0)
    };
    assert!(!lost_a_with_b(true));
    assert!(lost_a_with_b(false));
}

#[test]
fn eadr_makes_a_plain_store_persistent_and_adr_does_not() {
    let program = |pm: Pmem, c: Core| async move {
        pm.store(&c, A, &v(9), Purpose::UNTAGGED).await?;
        pm.sfence(&c).await
    };
    let (_, eadr) = run(PersistenceDomain::Eadr, 4, program);
    assert!(final_states(&eadr).iter().all(|s| word(s, A.0) == 9));
    assert_eq!(word(&eadr.persistent_image().to_vec(), A.0), 9, "this run too");
    // The same program without eADR: the store may be lost (the mechanism
    // switched off shows the missing flush).
    let (_, adr) = run(PersistenceDomain::Adr, 4, program);
    assert!(final_states(&adr).iter().any(|s| word(s, A.0) == 0));
}

#[test]
fn a_non_temporal_store_persists_at_the_sfence_and_not_before() {
    for domain in [PersistenceDomain::Adr, PersistenceDomain::Eadr] {
        let (_, pm) = run(domain, 5, |pm, c| async move {
            pm.nt_store(&c, A, &v(3), Purpose::UNTAGGED).await
        });
        assert_eq!(pm.buffered_nt_lines(0).len(), 1);
        let states = final_states(&pm);
        assert!(
            states.iter().any(|s| word(s, A.0) == 0),
            "{domain:?}: still in the WC buffer"
        );
        let (_, pm) = run(domain, 5, |pm, c| async move {
            pm.nt_store(&c, A, &v(3), Purpose::UNTAGGED).await?;
            pm.sfence(&c).await
        });
        assert!(final_states(&pm).iter().all(|s| word(s, A.0) == 3), "{domain:?}");
        assert!(pm.buffered_nt_lines(0).is_empty());
    }
}

#[test]
fn an_aligned_word_never_tears_but_a_line_may() {
    // One 64-byte store of eight words, each all-ones: every state has
    // each word either zero or all-ones, and some states mix them.
    let (_, pm) = run(PersistenceDomain::Adr, 6, |pm, c| async move {
        pm.store(&c, A, &[0xff; 64], Purpose::UNTAGGED).await
    });
    let states = final_states(&pm);
    let mut mixed = false;
    for s in &states {
        let words: Vec<u64> = (0..8).map(|w| word(s, A.0 + 8 * w)).collect();
        assert!(
            words.iter().all(|&x| x == 0 || x == u64::MAX),
            "torn word: {words:x?}"
        );
        mixed |= words.contains(&0) && words.contains(&u64::MAX);
    }
    assert!(mixed, "a 64-byte store is not failure-atomic");
    assert_eq!(states.len(), 256, "every subset of the eight words");
}

#[test]
fn later_stores_to_a_line_persist_only_with_the_earlier_ones() {
    // Two stores to one line, then a crash: the second never persists
    // without the first (the line is written back whole).
    let (_, pm) = run(PersistenceDomain::Adr, 7, |pm, c| async move {
        pm.store(&c, A, &v(1), Purpose::UNTAGGED).await?;
        pm.store(&c, A + 8, &v(2), Purpose::UNTAGGED).await
    });
    let states = final_states(&pm);
    assert_eq!(states.len(), 3);
    assert!(!states.iter().any(|s| word(s, A.0 + 8) == 2 && word(s, A.0) == 0));
}

#[test]
fn the_live_image_is_always_one_of_the_allowed_states() {
    let ex = Executor::new(11);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let p = PmemProfile {
        writeback_per_store: 0.3,
        cache_lines: 4,
        ..profile(PersistenceDomain::Adr)
    };
    let pm = Pmem::attach(&m, p).unwrap();
    let c = m.core(0).unwrap();
    let pm2 = pm.clone();
    let snapshots = ex
        .block_on(async move {
            let mut snaps = Vec::new();
            for i in 0..12u64 {
                let at = PmAddr((i % 6) * 64 + (i % 3) * 8);
                pm2.store(&c, at, &v(i + 1), Purpose::UNTAGGED).await?;
                if i % 5 == 4 {
                    pm2.clwb(&c, at).await?;
                }
                snaps.push((pm2.trace().len(), pm2.persistent_image().to_vec()));
            }
            Ok::<_, PcieError>(snaps)
        })
        .unwrap()
        .unwrap();
    let trace = pm.trace();
    assert!(
        trace.entries().iter().any(|e| e.kind == PmEventKind::Writeback),
        "evictions happened"
    );
    let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), PersistenceDomain::Adr, 10).unwrap();
    for (len, live) in snapshots {
        cur.advance_past(len as usize - 1).unwrap();
        let (choices, _) = cur.choices(20, 0);
        assert!(
            choices
                .iter()
                .any(|c| cur.materialize(c).unwrap().to_vec() == live),
            "the run's own image after entry {len} is allowed"
        );
    }
}

#[test]
fn pm_instructions_take_the_optane_latencies() {
    let ex = Executor::new(8);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach(&m, profile(PersistenceDomain::Adr)).unwrap();
    let c = m.core(0).unwrap();
    let sim = m.sim();
    let (miss, seq, persist) = ex
        .block_on(async move {
            let t0 = sim.now();
            pm.load(&c, PmAddr(0x8000), &mut [0u8; 8]).await?;
            let t1 = sim.now();
            pm.load(&c, PmAddr(0x8040), &mut [0u8; 8]).await?;
            let t2 = sim.now();
            // The line is cached now: store, clwb, sfence is the write path.
            pm.store(&c, PmAddr(0x8000), &v(1), Purpose::UNTAGGED).await?;
            pm.clwb(&c, PmAddr(0x8000)).await?;
            pm.sfence(&c).await?;
            let t3 = sim.now();
            Ok::<_, PcieError>((t1.since(t0), t2.since(t1), t3.since(t2)))
        })
        .unwrap()
        .unwrap();
    let ns = |d: SimDuration| d.as_ns_f64();
    assert!((305.0..320.0).contains(&ns(miss)), "random read {miss}");
    assert!((169.0..185.0).contains(&ns(seq)), "sequential read {seq}");
    assert!((94.0..140.0).contains(&ns(persist)), "persistent write {persist}");
    assert!(m.cpu_stats().kernel > SimDuration::ZERO, "charged to the core");
    assert!(m.sim().now() > SimTime::ZERO);
}

#[test]
fn small_random_lines_amplify_media_writes_and_sequential_ones_do_not() {
    let media_writes = |stride: u64| {
        let (_, pm) = run(PersistenceDomain::Adr, 9, move |pm, c| async move {
            for i in 0..64u64 {
                let at = PmAddr(i * stride);
                pm.store(&c, at, &[1; 64], Purpose::UNTAGGED).await?;
                pm.clwb(&c, at).await?;
            }
            pm.sfence(&c).await
        });
        let k = pm.counters();
        assert_eq!(k.kind(PmEventKind::Clwb).ops, 64);
        assert_eq!(k.kind(PmEventKind::Sfence).ops, 1);
        assert_eq!(k.kind(PmEventKind::Store).bytes, 64 * 64);
        assert!(k.wpq_lines >= 64);
        k.media_writes
    };
    assert_eq!(media_writes(64), 16, "four lines share an XPLine");
    assert!(media_writes(512) >= 64, "one XPLine per line");
}

#[test]
fn same_seed_same_pm_trace_and_bus_trace() {
    let go = |seed: u64| {
        let ex = Executor::new(seed);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let p = PmemProfile {
            writeback_per_store: 0.2,
            cache_lines: 8,
            ..profile(PersistenceDomain::Adr)
        };
        let pm = Pmem::attach(&m, p).unwrap();
        for core in 0..2usize {
            let c = m.core(core).unwrap();
            let pm = pm.clone();
            m.sim().spawn(async move {
                for i in 0..40u64 {
                    let at = PmAddr(core as u64 * 0x4000 + (i % 13) * 64);
                    pm.store(&c, at, &v(i), Purpose::UNTAGGED).await.unwrap();
                    if i % 7 == 0 {
                        pm.clwb(&c, at).await.unwrap();
                        pm.sfence(&c).await.unwrap();
                    }
                    if i % 5 == 0 {
                        pm.nt_store(&c, at + 0x1000, &v(i), Purpose::UNTAGGED)
                            .await
                            .unwrap();
                    }
                }
            });
        }
        ex.run();
        let h = (pm.trace().hash(), m.trace().hash(), pm.trace().len());
        let wb = pm
            .trace()
            .entries()
            .iter()
            .filter(|e| e.kind == PmEventKind::Writeback)
            .count();
        (h, wb)
    };
    let (a, wa) = go(42);
    let (b, _) = go(42);
    assert_eq!(a, b);
    assert!(wa > 0, "seeded write-backs happened");
    let (c, _) = go(43);
    assert_ne!(a.0, c.0, "another seed evicts other lines");
}

#[test]
fn bad_pm_input_is_a_typed_error() {
    let ex = Executor::new(0);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach(&m, profile(PersistenceDomain::Adr)).unwrap();
    let other = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let foreign = other.core(1).unwrap();
    let c = m.core(0).unwrap();
    let pm2 = pm.clone();
    let r = ex
        .block_on(async move {
            vec![
                pm2.store(&c, PmAddr(4), &v(1), Purpose::UNTAGGED).await,
                pm2.store(&c, PmAddr(8), &[1; 12], Purpose::UNTAGGED).await,
                pm2.store(&c, PmAddr(56), &[1; 16], Purpose::UNTAGGED).await,
                pm2.nt_store(&c, PmAddr(0), &[], Purpose::UNTAGGED).await,
                pm2.store(&c, PmAddr(SIZE), &v(1), Purpose::UNTAGGED).await,
                pm2.load(&c, PmAddr(SIZE - 4), &mut [0u8; 8]).await,
                pm2.clwb(&c, PmAddr(u64::MAX)).await,
                pm2.store(&foreign, PmAddr(0), &v(1), Purpose::UNTAGGED).await,
                pm2.load(&c, PmAddr(0), &mut vec![0u8; (1 << 20) + 1]).await,
            ]
        })
        .unwrap();
    assert!(matches!(r[0], Err(PcieError::PmMisaligned { addr: 4, len: 8 })));
    assert!(matches!(r[1], Err(PcieError::PmMisaligned { len: 12, .. })));
    assert!(
        matches!(r[2], Err(PcieError::PmMisaligned { addr: 56, len: 16 })),
        "crosses a line"
    );
    assert!(matches!(r[3], Err(PcieError::PmMisaligned { len: 0, .. })));
    assert!(matches!(r[4], Err(PcieError::PmOutOfRange { size: SIZE, .. })));
    assert!(matches!(r[5], Err(PcieError::PmOutOfRange { .. })));
    assert!(matches!(r[6], Err(PcieError::PmOutOfRange { .. })));
    assert!(matches!(r[7], Err(PcieError::ForeignCore(1))));
    assert!(matches!(r[8], Err(PcieError::TooLarge { .. })));
    assert!(pm.trace().is_empty(), "nothing happened");
    let bad = |p: PmemProfile| Pmem::attach(&m, p).unwrap_err();
    assert!(matches!(
        bad(PmemProfile {
            size: 100,
            ..PmemProfile::default()
        }),
        PcieError::BadPmemProfile(_)
    ));
    assert!(matches!(
        bad(PmemProfile {
            writeback_per_store: 2.0,
            ..PmemProfile::default()
        }),
        PcieError::BadPmemProfile(_)
    ));
    assert!(matches!(
        Pmem::attach_with_image(&m, profile(PersistenceDomain::Adr), PageStore::zeroed(64)),
        Err(PcieError::BadPmemProfile(_))
    ));
    let trace = pm.trace();
    let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), PersistenceDomain::Adr, 10).unwrap();
    assert!(matches!(
        cur.advance_past(0),
        Err(PcieError::CrashPointOutOfRange { .. })
    ));
}

#[test]
fn persistent_memory_leaves_the_bus_trace_of_other_programs_unchanged() {
    use pcie_sim::testing::RegisterFile;
    use pcie_sim::BarKind;
    let go = |with_pm: bool| {
        let ex = Executor::new(5);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let _dev = RegisterFile::attach(&m, Some(1 << 20), None);
        let pm = with_pm.then(|| Pmem::attach(&m, profile(PersistenceDomain::Adr)).unwrap());
        let pmr = m.bar(0, BarKind::Pmr).unwrap();
        let c = m.core(0).unwrap();
        ex.block_on(async move {
            for i in 0..10u64 {
                c.persistent_write(
                    pmr + i * 64,
                    &[i as u8; 64],
                    Purpose::new(1),
                    0,
                    Default::default(),
                )
                .await
                .unwrap();
            }
        })
        .unwrap();
        if let Some(pm) = pm {
            assert!(pm.trace().is_empty());
        }
        let t = m.trace();
        (t.hash(), t.len(), ex.sim().now())
    };
    assert_eq!(go(false), go(true));
}

#[test]
fn sustained_writes_run_at_the_media_write_bandwidth() {
    // 1 MiB of full-line non-temporal stores, then one sfence: the fence
    // returns when the last line is in the DIMM's buffer, when the media
    // has written all but the 63 XPLines the buffer holds before it, at
    // 2.3 GB/s (so the 1 MiB seems to take 63 x 256 bytes less time).
    const BYTES: u64 = 1 << 20;
    let ex = Executor::new(10);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::CountersOnly);
    let pm = Pmem::attach(
        &m,
        PmemProfile {
            size: BYTES,
            ..profile(PersistenceDomain::Adr)
        },
    )
    .unwrap();
    let c = m.core(0).unwrap();
    let sim = m.sim();
    let p = pm.clone();
    let took = ex
        .block_on(async move {
            for line in 0..BYTES / 64 {
                p.nt_store(&c, PmAddr(line * 64), &[7; 64], Purpose::UNTAGGED)
                    .await?;
            }
            p.sfence(&c).await?;
            Ok::<_, PcieError>(sim.now().since(SimTime::ZERO))
        })
        .unwrap()
        .unwrap();
    let gbs = (BYTES - 63 * 256) as f64 / took.as_secs_f64() / 1e9;
    assert!((2.25..2.31).contains(&gbs), "{gbs} GB/s");
    let k = pm.counters();
    assert_eq!(k.media_writes, BYTES / 256, "full XPLines: no amplification");
    assert_eq!(k.kind(PmEventKind::NtLine).ops, BYTES / 64);
}
