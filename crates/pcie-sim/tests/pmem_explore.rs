//! The shared exploration loop of persistent-memory crash tests
//! (`pcie_sim::pmem::explore`): every state is checked, equal states under
//! equal promises are judged once, and equal states under different
//! promises are judged again.

use pcie_sim::pmem::explore;
use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, PersistenceDomain, PmAddr, Pmem, PmemCursor, PmemProfile,
    Purpose, TraceMode,
};

const SIZE: u64 = 64 << 10;

/// Two words stored and flushed one after the other, then nothing: the
/// last entries change nothing that could persist.
fn recorded() -> Pmem {
    let ex = Executor::new(1);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach(
        &m,
        PmemProfile {
            size: SIZE,
            domain: PersistenceDomain::Adr,
            ..PmemProfile::default()
        },
    )
    .unwrap();
    let core = m.core(0).unwrap();
    let pm2 = pm.clone();
    ex.block_on(async move {
        for (i, a) in [0x1000u64, 0x2000].into_iter().enumerate() {
            pm2.store(&core, PmAddr(a), &(i as u64 + 1).to_le_bytes(), Purpose::UNTAGGED)
                .await?;
            pm2.clwb(&core, PmAddr(a)).await?;
            pm2.sfence(&core).await?;
        }
        pm2.sfence(&core).await?;
        pm2.sfence(&core).await
    })
    .unwrap()
    .unwrap();
    pm
}

#[test]
fn equal_states_share_a_verdict_only_under_equal_promises() {
    let pm = recorded();
    let trace = pm.trace();
    let n = trace.entries().len();
    let run = |promised: &dyn Fn(usize) -> usize| {
        let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), PersistenceDomain::Adr, 10).unwrap();
        let mut passed = 0u64;
        let r = explore(
            &mut cur,
            0..n,
            8,
            false,
            promised,
            |_, img| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&img.to_vec()[0x2000..0x2008]);
                Ok(u64::from_le_bytes(w))
            },
            |_| passed += 1,
        )
        .unwrap();
        assert_eq!(passed, r.states, "every passing state is tallied");
        r
    };
    let same = run(&|_| 0);
    let apart = run(&|k| k);
    assert_eq!(same.points, n);
    assert_eq!(same.states, apart.states, "the same states are checked");
    assert!(same.states > same.judged, "equal states are judged once");
    assert!(
        apart.judged > same.judged,
        "a state equal to one after another promise is judged again"
    );
    assert_eq!(same.left_out, 0);
}

/// Explores every state of `pm`'s run, failing those in which the second
/// word landed.
fn failing_second_word(pm: &Pmem, first_only: bool) -> pcie_sim::pmem::PmExploreReport {
    let trace = pm.trace();
    let n = trace.entries().len();
    let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), PersistenceDomain::Adr, 10).unwrap();
    explore(
        &mut cur,
        0..n,
        8,
        first_only,
        |_| (),
        |_, img| {
            if img.to_vec()[0x2000] == 2 {
                Err("second word".to_string())
            } else {
                Ok(())
            }
        },
        |_| {},
    )
    .unwrap()
}

#[test]
fn a_failing_state_is_reported_where_it_was_found() {
    let pm = recorded();
    let r = failing_second_word(&pm, false);
    assert!(!r.violations.is_empty());
    let first = &r.violations[0];
    assert_eq!(first.why, "second word");
    assert!(first
        .to_string()
        .contains(&format!("after trace entry {}", first.point)));
    // With first_only the loop stops there.
    let one = failing_second_word(&pm, true);
    assert_eq!(one.violations.len(), 1);
    assert_eq!(one.violations[0], *first);
}
