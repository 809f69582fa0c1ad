//! The persistent-memory crash envelope ([`PmemCursor`]) against a direct
//! statement of its rules (`docs/persistence.md`, "Persistent memory on
//! the memory bus", M1 to M5), on random multi-core programs of cached
//! and non-temporal stores, flushes and fences over a few lines, under
//! ADR and eADR, with seeded evictions in the run (which must not matter).
//!
//! The brute force works on word stores read from the trace alone: a
//! word store is certain by the rules' own wording (a completed flush of
//! its line after it, a later non-temporal store to its line, eADR, or for
//! a non-temporal store a fence of its core after it); a state is any set
//! of word stores holding the certain ones, in which a cached word store
//! brings every earlier cached store to its line, and the words of one
//! write-combining line instance come all or none. Images are compared as
//! sets at every crash point with few enough pending items to enumerate.

use std::collections::BTreeSet;

use pcie_sim::{
    Executor, Machine, MachineProfile, PageStore, PersistenceDomain, PmAddr, PmChoice, PmEntry, PmEventKind,
    PmTrace, Pmem, PmemCursor, PmemProfile, Purpose, TraceMode,
};
use proptest::prelude::*;

const SIZE: u64 = 4096;
const LINES: u64 = 3;
const BOUND: u32 = 12;

#[derive(Clone, Debug)]
enum Op {
    /// `words` words from word `word` of line `line` (clamped to the line).
    Store {
        line: u64,
        word: u64,
        words: u64,
    },
    NtStore {
        line: u64,
        word: u64,
        words: u64,
    },
    Clflush(u64),
    Clflushopt(u64),
    Clwb(u64),
    Sfence,
    Mfence,
    Load(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let store = (0..LINES, 0u64..8, 1u64..=2);
    prop_oneof![
        6 => store.clone().prop_map(|(line, word, words)| Op::Store { line, word, words }),
        2 => store.prop_map(|(line, word, words)| Op::NtStore { line, word, words }),
        1 => (0..LINES).prop_map(Op::Clflush),
        1 => (0..LINES).prop_map(Op::Clflushopt),
        2 => (0..LINES).prop_map(Op::Clwb),
        2 => Just(Op::Sfence),
        1 => Just(Op::Mfence),
        1 => (0..LINES).prop_map(Op::Load),
    ]
}

fn run(programs: Vec<Vec<Op>>, domain: PersistenceDomain, seed: u64) -> Pmem {
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let profile = PmemProfile {
        size: SIZE,
        domain,
        cache_lines: 2,
        writeback_per_store: 0.3,
        ..PmemProfile::default()
    };
    let pm = Pmem::attach(&m, profile).unwrap();
    for (c, prog) in programs.into_iter().enumerate() {
        let core = m.core(c).unwrap();
        let pm = pm.clone();
        m.sim().spawn(async move {
            let mut next = 1u64;
            for op in prog {
                let mut value = |words: u64| {
                    let mut b = Vec::new();
                    for _ in 0..words {
                        b.extend_from_slice(&(((c as u64 + 1) << 32) | next).to_le_bytes());
                        next += 1;
                    }
                    b
                };
                let at = |line: u64, word: u64| PmAddr(line * 64 + word * 8);
                let r = match op {
                    Op::Store { line, word, words } => {
                        let words = words.min(8 - word);
                        pm.store(&core, at(line, word), &value(words), Purpose::UNTAGGED)
                            .await
                    }
                    Op::NtStore { line, word, words } => {
                        let words = words.min(8 - word);
                        pm.nt_store(&core, at(line, word), &value(words), Purpose::UNTAGGED)
                            .await
                    }
                    Op::Clflush(l) => pm.clflush(&core, at(l, 0)).await,
                    Op::Clflushopt(l) => pm.clflushopt(&core, at(l, 3)).await,
                    Op::Clwb(l) => pm.clwb(&core, at(l, 7)).await,
                    Op::Sfence => pm.sfence(&core).await,
                    Op::Mfence => pm.mfence(&core).await,
                    Op::Load(l) => pm.load(&core, at(l, 1), &mut [0u8; 16]).await,
                };
                r.unwrap();
            }
        });
    }
    ex.run();
    pm
}

/// One 8-byte word store read from the trace.
#[derive(Clone, Debug)]
struct WordStore {
    seq: usize,
    /// The trace index it is applied at (a non-temporal word: the last
    /// store of its write-combining line instance).
    apply_at: usize,
    core: u8,
    line: u64,
    addr: u64,
    value: [u8; 8],
    nt: bool,
    /// Non-temporal: its write-combining line instance.
    instance: usize,
}

fn line_of(a: u64) -> u64 {
    a & !63
}

/// The word stores of entries `0..=k`, with each non-temporal store's
/// line instance: a core's non-temporal stores to one line share an
/// instance until the core fences, flushes the line, makes a cached store
/// to it, or the instance has all 64 bytes.
fn word_stores(trace: &PmTrace, k: usize) -> Vec<WordStore> {
    let entries = &trace.entries()[..=k];
    let mut out: Vec<WordStore> = Vec::new();
    // (core, line) -> (instance id, bytes stored mask)
    let mut open: std::collections::BTreeMap<(u8, u64), (usize, u64)> = Default::default();
    let mut next_instance = 0usize;
    for (i, e) in entries.iter().enumerate() {
        let line = line_of(e.addr);
        match e.kind {
            PmEventKind::Sfence | PmEventKind::Mfence => open.retain(|(c, _), _| *c != e.source),
            PmEventKind::Clflush | PmEventKind::Clflushopt | PmEventKind::Clwb | PmEventKind::Store => {
                open.remove(&(e.source, line));
            }
            _ => {}
        }
        if matches!(e.kind, PmEventKind::Store | PmEventKind::NtStore) {
            let nt = e.kind == PmEventKind::NtStore;
            let instance = if nt {
                let slot = open.entry((e.source, line)).or_insert_with(|| {
                    next_instance += 1;
                    (next_instance, 0)
                });
                let off = e.addr - line;
                slot.1 |= if e.len == 64 {
                    u64::MAX
                } else {
                    ((1u64 << e.len) - 1) << off
                };
                let id = slot.0;
                if slot.1 == u64::MAX {
                    open.remove(&(e.source, line));
                }
                id
            } else {
                0
            };
            for (w, word) in trace.payload(e).chunks_exact(8).enumerate() {
                let mut value = [0u8; 8];
                value.copy_from_slice(word);
                out.push(WordStore {
                    seq: i,
                    apply_at: i,
                    core: e.source,
                    line,
                    addr: e.addr + 8 * w as u64,
                    value,
                    nt,
                    instance,
                });
            }
        }
    }
    // A write-combining line lands with its last store's bytes.
    for j in 0..out.len() {
        if out[j].nt {
            let last = out
                .iter()
                .filter(|o| o.nt && o.instance == out[j].instance)
                .map(|o| o.seq)
                .max()
                .unwrap_or(out[j].seq);
            out[j].apply_at = last;
        }
    }
    out
}

/// True if entry `j` of core `core` in `(after, k]` has one of `kinds`.
fn core_did(entries: &[PmEntry], core: u8, after: usize, k: usize, kinds: &[PmEventKind]) -> bool {
    entries[after + 1..=k]
        .iter()
        .any(|e| e.source == core && kinds.contains(&e.kind))
}

fn certain(ws: &WordStore, entries: &[PmEntry], k: usize, domain: PersistenceDomain) -> bool {
    use PmEventKind::*;
    let after = &entries[ws.seq + 1..=k];
    if ws.nt {
        return core_did(entries, ws.core, ws.seq, k, &[Sfence, Mfence]);
    }
    if domain == PersistenceDomain::Eadr {
        return true;
    }
    if after
        .iter()
        .any(|e| e.kind == NtStore && line_of(e.addr) == ws.line)
    {
        return true;
    }
    after.iter().enumerate().any(|(o, f)| {
        let fi = ws.seq + 1 + o;
        line_of(f.addr) == ws.line
            && match f.kind {
                Clflush => core_did(
                    entries,
                    f.source,
                    fi,
                    k,
                    &[Store, NtStore, Clflush, Sfence, Mfence],
                ),
                Clflushopt | Clwb => core_did(entries, f.source, fi, k, &[Sfence, Mfence]),
                _ => false,
            }
    })
}

/// Every image the rules allow after entry `k`, by brute force.
fn brute_force(trace: &PmTrace, k: usize, domain: PersistenceDomain) -> BTreeSet<Vec<u8>> {
    let entries = trace.entries();
    let ws = word_stores(trace, k);
    // Units: a cached word store alone, a write-combining instance whole.
    let mut units: Vec<Vec<usize>> = Vec::new();
    let mut by_instance: std::collections::BTreeMap<usize, usize> = Default::default();
    let mut sure: Vec<usize> = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        if certain(w, entries, k, domain) {
            sure.push(i);
        } else if w.nt {
            let u = *by_instance.entry(w.instance).or_insert_with(|| {
                units.push(Vec::new());
                units.len() - 1
            });
            units[u].push(i);
        } else {
            units.push(vec![i]);
        }
    }
    assert!(units.len() <= BOUND as usize + 4, "too many units to enumerate");
    let mut out = BTreeSet::new();
    for mask in 0u64..1 << units.len() {
        let mut set: BTreeSet<usize> = sure.iter().copied().collect();
        for (u, members) in units.iter().enumerate() {
            if mask & (1 << u) != 0 {
                set.extend(members);
            }
        }
        let ordered = set.iter().all(|&i| {
            ws[i].nt
                || ws
                    .iter()
                    .enumerate()
                    .all(|(j, o)| o.nt || o.line != ws[i].line || o.seq >= ws[i].seq || set.contains(&j))
        });
        if !ordered {
            continue;
        }
        let mut order: Vec<usize> = set.into_iter().collect();
        order.sort_by_key(|&i| (ws[i].apply_at, ws[i].seq));
        let mut img = vec![0u8; SIZE as usize];
        for i in order {
            let a = ws[i].addr as usize;
            img[a..a + 8].copy_from_slice(&ws[i].value);
        }
        out.insert(img);
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn crash_states_are_exactly_what_the_rules_allow(
        programs in prop::collection::vec(prop::collection::vec(op(), 1..12), 1..=2),
        eadr: bool,
        seed in 0u64..1000,
    ) {
        let domain = if eadr { PersistenceDomain::Eadr } else { PersistenceDomain::Adr };
        let pm = run(programs, domain, seed);
        let trace = pm.trace();
        let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), domain, 10).unwrap();
        let mut compared = 0;
        for k in 0..cur.len() {
            cur.advance_past(k).unwrap();
            let pending = cur.pending();
            if pending.items.len() > BOUND as usize {
                continue;
            }
            let (choices, left) = cur.choices(BOUND, seed);
            prop_assert_eq!(left, 0);
            let got: BTreeSet<Vec<u8>> = choices
                .iter()
                .map(|c| cur.materialize(c).unwrap().to_vec())
                .collect();
            let want = brute_force(&trace, k, domain);
            prop_assert_eq!(&got, &want, "after entry {}: {:?}", k, &trace.entries()[..=k]);
            compared += 1;
        }
        if !trace.entries().is_empty() {
            prop_assert!(compared > 0);
        }
    }
}

#[test]
fn past_the_bound_states_are_sampled_and_counted() {
    let program = vec![(0..6)
        .map(|i| Op::Store {
            line: i % LINES,
            word: 0,
            words: 2,
        })
        .collect::<Vec<_>>()];
    let pm = run(program, PersistenceDomain::Adr, 1);
    let trace = pm.trace();
    let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), PersistenceDomain::Adr, 10).unwrap();
    cur.advance_past(cur.len() - 1).unwrap();
    assert_eq!(cur.pending().items.len(), 12);
    let (choices, left) = cur.choices(4, 9);
    assert!(choices.len() <= 16);
    assert_eq!(left, (1 << 12) - 16);
    assert!(
        choices.contains(&PmChoice::default()),
        "nothing lost is among the samples"
    );
    assert_eq!(cur.choices(4, 9), (choices, left), "deterministic");
}

#[test]
fn a_choice_against_the_line_order_is_refused() {
    let program = vec![vec![
        Op::Store {
            line: 0,
            word: 0,
            words: 1,
        },
        Op::Store {
            line: 0,
            word: 1,
            words: 1,
        },
    ]];
    let pm = run(program, PersistenceDomain::Adr, 2);
    let trace = pm.trace();
    let mut cur = PmemCursor::new(&trace, PageStore::zeroed(SIZE), PersistenceDomain::Adr, 10).unwrap();
    cur.advance_past(cur.len() - 1).unwrap();
    let later_only = PmChoice { landed: vec![1] };
    assert!(matches!(
        cur.materialize(&later_only),
        Err(pcie_sim::PcieError::BadChoice(_))
    ));
    assert!(cur.materialize(&PmChoice { landed: vec![0, 1] }).is_ok());
    assert!(matches!(
        cur.materialize(&PmChoice { landed: vec![5] }),
        Err(pcie_sim::PcieError::BadChoice(_))
    ));
}
