//! The read-set reduction (`crashfuzz::observe`) against brute force: at
//! every crash point of small runs, every state the envelope allows is
//! built and judged in full, and it must lie in exactly one leaf of the
//! point's tree and get that leaf's verdict. Runs include switched-off
//! ordering mechanisms, so that failing verdicts are compared too, and a
//! cached drive and the PMR modes, so that both block versions and PMR
//! lines are split.

mod common;

use common::{config, workload};
use crashfuzz::check::{check_state, CheckContext};
use crashfuzz::observe::PointTree;
use crashfuzz::{record, ModeName, RunConfig, SavedConfig, Workload, SELF_CHECKS};
use nvme_ctrl::crash::Explorer;

/// Points compared, states compared, checks the trees made.
fn compare(w: &Workload, cfg: &RunConfig) -> (usize, usize, usize) {
    let rec = record(w, cfg).expect("record");
    let saved = SavedConfig::of_run(w, cfg);
    let brute = CheckContext {
        verdicts: None,
        recoveries: None,
        observe: false,
        ..CheckContext::for_run(&saved, &rec, true)
    };
    let observing = CheckContext {
        observe: true,
        ..brute.clone()
    };
    let mut ex = Explorer::new(
        &rec.trace,
        rec.layout.clone(),
        vec![rec.base_pmr.clone()],
        0,
        cfg.profile.volatile_cache(),
    )
    .expect("explorer");
    let (mut points, mut states, mut checks) = (0, 0, 0);
    let mut last = None;
    for k in 0..ex.points() {
        let version = ex.advance(k).expect("advance");
        if last == Some(version) {
            continue;
        }
        last = Some(version);
        let (choices, left_out) = ex.choices_at(k, 8, 8).expect("choices");
        if left_out > 0 || choices.len() > 64 {
            continue;
        }
        let items = ex.items_at(k).expect("items");
        let mut tree = PointTree::new(&ex, items);
        let mut leaves = Vec::new();
        while let Some((id, choice)) = tree.next_node() {
            let st = ex.build(k, &choice).expect("build");
            let out = check_state(&observing, &st);
            let reads = out.reads.expect("observed");
            tree.read(id, &reads);
            leaves.push((id, reads, out.failures));
        }
        assert!(!tree.too_wide);
        checks += leaves.len();
        for c in &choices {
            let st = ex.build(k, c).expect("build");
            let verdict = check_state(&brute, &st).failures;
            let owners: Vec<_> = leaves
                .iter()
                .filter(|(id, reads, _)| tree.in_leaf(*id, reads, c))
                .collect();
            assert_eq!(
                owners.len(),
                1,
                "{} point {k}: state {c:?} is in {} leaves",
                w.name,
                owners.len()
            );
            assert_eq!(
                owners[0].2, verdict,
                "{} point {k}: state {c:?} judged unlike its leaf",
                w.name
            );
            states += 1;
        }
        points += 1;
    }
    (points, states, checks)
}

#[test]
fn every_state_gets_its_leafs_verdict_with_each_mechanism_switched_off() {
    let (mut states, mut checks, mut failing) = (0, 0, 0);
    // Every self-check: their faults fail states on both drive profiles,
    // so a leaf whose verdict was wrongly taken for a state shows here.
    for sc in SELF_CHECKS {
        let (w, cfg) = sc.config(true).expect("self-check");
        let (_, s, c) = compare(&w, &cfg);
        states += s;
        checks += c;
        failing += usize::from(s > 0);
    }
    eprintln!("self-checks: {states} states, {checks} checks");
    assert!(failing > 0 && states > 0);
    assert!(checks < states, "the trees checked {checks} of {states} states");
}

/// Safe modes pass every state, so here the verdicts cannot differ: this
/// checks the partition (each state in exactly one leaf) on a cached drive
/// and the PMR modes, where units have several classes.
#[test]
fn every_state_lies_in_exactly_one_leaf_on_a_cached_drive_and_the_pmr() {
    let w = workload("generic_035");
    let mut total = (0, 0, 0);
    for (mode, profile) in [
        (ModeName::Classic, "flash-vwc"),
        (ModeName::Horae, "flash-vwc"),
        (ModeName::Mq, "flash-vwc"),
        (ModeName::Mq, "optane-905p"),
        (ModeName::MqAtomic, "optane-905p"),
    ] {
        let (p, s, c) = compare(&w, &config(mode, profile));
        total = (total.0 + p, total.1 + s, total.2 + c);
    }
    let (points, states, checks) = total;
    eprintln!("generic_035: {points} points, {states} states, {checks} checks");
    assert!(points > 50, "{points} points compared");
    assert!(checks < states, "the trees checked {checks} of {states} states");
}

#[test]
fn a_tree_cut_by_the_budget_is_the_same_whatever_checker_finishes_first() {
    let w = workload("m9_cross_queue");
    let cfg = config(ModeName::Mq, "flash-vwc");
    let run = |jobs| {
        let o = crashfuzz::ExploreOptions {
            node_budget: 16,
            jobs,
            ..common::opts()
        };
        crashfuzz::explore(&w, &cfg, &o, &w.name).expect("explore")
    };
    let one = run(1);
    assert!(one.states_not_visited > 0, "the budget cut the tree: {one:?}");
    for _ in 0..3 {
        let two = run(2);
        assert_eq!(
            (
                two.states_checked,
                two.states_deduplicated,
                two.states_by_read_set,
                two.states_not_visited
            ),
            (
                one.states_checked,
                one.states_deduplicated,
                one.states_by_read_set,
                one.states_not_visited
            )
        );
    }
}
