//! Unit tests of the live persistent-memory model ([`super::Pmem`]).

use super::*;
use crate::executor::Executor;
use crate::profile::MachineProfile;
use crate::trace::TraceMode;

fn setup(profile: PmemProfile) -> (Executor, Machine, Pmem) {
    let ex = Executor::new(1);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach(&m, profile).unwrap();
    (ex, m, pm)
}

fn quiet() -> PmemProfile {
    PmemProfile {
        size: 1 << 16,
        writeback_per_store: 0.0,
        ..PmemProfile::default()
    }
}

fn kinds(pm: &Pmem) -> Vec<(PmEventKind, u8)> {
    pm.trace().entries().iter().map(|e| (e.kind, e.source)).collect()
}

#[test]
fn a_cached_store_sends_the_cores_non_temporal_line_for_that_line_first() {
    let (ex, m, pm) = setup(quiet());
    let c = m.core(0).unwrap();
    let p = pm.clone();
    ex.block_on(async move {
        p.nt_store(&c, PmAddr(0), &[1; 8], Purpose::UNTAGGED).await?;
        p.store(&c, PmAddr(8), &[2; 8], Purpose::UNTAGGED).await
    })
    .unwrap()
    .unwrap();
    assert!(pm.buffered_nt_lines(0).is_empty());
    assert_eq!(
        kinds(&pm),
        vec![
            (PmEventKind::NtStore, 0),
            (PmEventKind::NtLine, 0),
            (PmEventKind::Store, 0)
        ]
    );
    assert_eq!(pm.counters().wpq_lines, 1);
}

#[test]
fn a_non_temporal_store_writes_a_dirty_cached_line_back_and_invalidates_it() {
    let (ex, m, pm) = setup(quiet());
    let c = m.core(0).unwrap();
    let p = pm.clone();
    ex.block_on(async move {
        p.store(&c, PmAddr(0), &[1; 8], Purpose::UNTAGGED).await?;
        p.nt_store(&c, PmAddr(8), &[2; 8], Purpose::UNTAGGED).await?;
        p.load(&c, PmAddr(0), &mut [0u8; 16]).await
    })
    .unwrap()
    .unwrap();
    assert_eq!(
        kinds(&pm)[..3],
        [
            (PmEventKind::Store, 0),
            (PmEventKind::Writeback, 0),
            (PmEventKind::NtStore, 0)
        ]
    );
    assert_eq!(pm.counters().load_misses, 1, "the line left the cache");
    let mut b = [0u8; 8];
    pm.persistent_image().read(0, &mut b);
    assert_eq!(b, [1; 8], "the cached store was written back");
}

#[test]
fn clwb_keeps_the_line_cached_and_clflushopt_does_not() {
    for (evicts, misses) in [(false, 0), (true, 1)] {
        let (ex, m, pm) = setup(quiet());
        let c = m.core(0).unwrap();
        let p = pm.clone();
        ex.block_on(async move {
            p.store(&c, PmAddr(64), &[1; 8], Purpose::UNTAGGED).await?;
            if evicts {
                p.clflushopt(&c, PmAddr(64)).await?;
            } else {
                p.clwb(&c, PmAddr(64)).await?;
            }
            p.sfence(&c).await?;
            p.load(&c, PmAddr(64), &mut [0u8; 8]).await
        })
        .unwrap()
        .unwrap();
        assert_eq!(pm.counters().load_misses, misses);
        assert_eq!(pm.counters().wpq_lines, 1);
    }
}

#[test]
fn loads_see_the_latest_store_of_any_core_on_either_path() {
    let (ex, m, pm) = setup(quiet());
    let (c0, c1) = (m.core(0).unwrap(), m.core(1).unwrap());
    let p = pm.clone();
    let got = ex
        .block_on(async move {
            let mut a = [0u8; 16];
            p.store(&c0, PmAddr(0), &[1; 8], Purpose::UNTAGGED).await?;
            p.nt_store(&c0, PmAddr(8), &[2; 8], Purpose::UNTAGGED).await?;
            p.load(&c1, PmAddr(0), &mut a).await?;
            p.store(&c1, PmAddr(0), &[3; 8], Purpose::UNTAGGED).await?;
            let mut b = [0u8; 4];
            p.load(&c0, PmAddr(2), &mut b).await?;
            Ok::<_, PcieError>((a, b))
        })
        .unwrap()
        .unwrap();
    let mut want = [1u8; 16];
    want[8..].fill(2);
    assert_eq!(got, (want, [3; 4]));
    assert_eq!(pm.counters().loads, PmTally { ops: 2, bytes: 20 });
}

#[test]
fn the_access_log_names_lines_read_before_they_were_written() {
    let (ex, m, pm) = setup(quiet());
    assert!(pm.take_access().is_none());
    pm.log_access();
    let c = m.core(0).unwrap();
    let p = pm.clone();
    ex.block_on(async move {
        p.store(&c, PmAddr(64), &[1; 64], Purpose::UNTAGGED).await?;
        p.load(&c, PmAddr(64), &mut [0u8; 64]).await?;
        p.load(&c, PmAddr(200), &mut [0u8; 8]).await?;
        p.nt_store(&c, PmAddr(256), &[1; 8], Purpose::UNTAGGED).await?;
        p.load(&c, PmAddr(256), &mut [0u8; 16]).await
    })
    .unwrap()
    .unwrap();
    let log = pm.take_access().unwrap();
    assert_eq!(
        log.reads(),
        &[3, 4],
        "line 1 was written whole first; line 4 only in part"
    );
    assert!(pm.take_access().unwrap().reads().is_empty(), "a fresh log");
}

#[test]
fn the_trace_mode_can_change_and_the_hash_goes_on() {
    let (ex, m, pm) = setup(quiet());
    pm.set_trace_mode(TraceMode::Off);
    let c = m.core(0).unwrap();
    let p = pm.clone();
    ex.block_on(async move { p.store(&c, PmAddr(0), &[1; 8], Purpose::UNTAGGED).await })
        .unwrap()
        .unwrap();
    assert!(pm.trace().entries().is_empty());
    assert_eq!(pm.trace().mode(), TraceMode::Off);
    assert_ne!(pm.trace().hash(), 0);
    assert_eq!(pm.counters().kind(PmEventKind::Store).ops, 1);
}

#[test]
fn a_full_cache_writes_back_a_seeded_victim() {
    let (ex, m, pm) = setup(PmemProfile {
        cache_lines: 2,
        ..quiet()
    });
    let c = m.core(0).unwrap();
    let p = pm.clone();
    ex.block_on(async move {
        for i in 0..3u64 {
            p.store(&c, PmAddr(i * 64), &[1; 8], Purpose::UNTAGGED).await?;
        }
        Ok::<_, PcieError>(())
    })
    .unwrap()
    .unwrap();
    let wb: Vec<_> = pm
        .trace()
        .entries()
        .iter()
        .filter(|e| e.kind == PmEventKind::Writeback)
        .map(|e| (e.addr, e.source))
        .collect();
    assert_eq!(wb.len(), 1);
    assert_eq!(wb[0].1, NO_CORE);
    assert!(wb[0].0 < 128, "one of the two lines stored first");
}

/// A copy kept by the persist hook holds, after every instruction, what
/// the persistence domain holds: under ADR (and not the cache's stores),
/// and under eADR (every store).
#[test]
fn the_persist_hook_sees_every_write_into_the_domain() {
    for domain in [PersistenceDomain::Adr, PersistenceDomain::Eadr] {
        let profile = PmemProfile {
            domain,
            writeback_per_store: 0.5,
            cache_lines: 4,
            ..quiet()
        };
        let (ex, m, pm) = setup(profile);
        let copy = Rc::new(RefCell::new(PageStore::zeroed(pm.size())));
        let c2 = copy.clone();
        pm.set_persist_hook(Some(Rc::new(move |addr: u64, data: &[u8]| {
            c2.borrow_mut().write(addr, data)
        })));
        let c = m.core(0).unwrap();
        let (p, seen) = (pm.clone(), copy.clone());
        let steps = ex
            .block_on(async move {
                let mut steps = 0;
                for i in 0..64u64 {
                    let addr = PmAddr((i * 72) % (1 << 12));
                    match i % 4 {
                        0 => p.store(&c, addr, &[i as u8; 16], Purpose::UNTAGGED).await?,
                        1 => p.nt_store(&c, addr, &[i as u8; 8], Purpose::UNTAGGED).await?,
                        2 => p.clwb(&c, addr).await?,
                        _ => p.sfence(&c).await?,
                    }
                    assert_eq!(
                        seen.borrow().to_vec(),
                        p.persistent_image().to_vec(),
                        "after step {i}"
                    );
                    steps += 1;
                }
                Ok::<_, PcieError>(steps)
            })
            .unwrap()
            .unwrap();
        assert_eq!(steps, 64);
        assert_ne!(
            copy.borrow().to_vec(),
            vec![0; pm.size() as usize],
            "something persisted"
        );
    }
}
