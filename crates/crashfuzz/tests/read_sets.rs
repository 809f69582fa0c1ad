//! The read-set reduction (`crashfuzz::observe`) against brute force: at
//! every crash point of small runs, every state the envelope allows is
//! built and judged in full, and it must lie in exactly one leaf of the
//! point's tree and get that leaf's verdict. Runs include switched-off
//! ordering mechanisms, so that failing verdicts are compared too, and a
//! cached drive and the PMR modes, so that both block versions and PMR
//! lines are split. Data blocks judged instead of read
//! (`crashfuzz::blockwise`) are predicted from the leaf's judgements on
//! each state's own bytes, and each witness must fail.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{config, workload, Compared};
use crashfuzz::blockwise::BlockJudgement;
use crashfuzz::check::{check_state, CheckContext, CheckOutcome};
use crashfuzz::devices::devices_explorer_of;
use crashfuzz::observe::{CrashSpace, PointTree};
use crashfuzz::oracle::Failure;
use crashfuzz::{record, ModeName, RunConfig, SavedConfig, Workload, SELF_CHECKS};
use mqfs::layout::BLOCK;
use nvme_ctrl::crash::{CrashState, DevicesState, Unit};
use nvme_ctrl::Image;

/// Compares every state of the small points of `w` under `cfg` with its
/// leaf's verdict, failing on any difference.
fn compare(w: &Workload, cfg: &RunConfig) -> Compared {
    let c = compare_judging(w, cfg, Keep::All);
    assert!(c.wrong.is_empty(), "{}", c.wrong.join("\n"));
    c
}

/// A built state's media blocks, by drive.
trait Blocks {
    /// What block `lba` of the drive on `port` holds, over that drive's
    /// starting image (`bases`, by port).
    fn block(&self, port: u8, lba: u64, bases: &[Arc<Image>]) -> [u8; BLOCK];
}

fn block_over(delta: Option<&nvme_ctrl::Block>, base: Option<&Arc<Image>>, lba: u64) -> [u8; BLOCK] {
    let mut buf = [0u8; BLOCK];
    match (delta, base) {
        (Some(b), _) => buf.copy_from_slice(&b[..]),
        (None, Some(base)) => base.read(lba, &mut buf),
        (None, None) => {}
    }
    buf
}

impl Blocks for CrashState {
    fn block(&self, port: u8, lba: u64, bases: &[Arc<Image>]) -> [u8; BLOCK] {
        assert_eq!(port, 0, "one drive, on port 0");
        block_over(self.media.get(&lba), bases.first(), lba)
    }
}

impl Blocks for DevicesState {
    fn block(&self, port: u8, lba: u64, bases: &[Arc<Image>]) -> [u8; BLOCK] {
        let d = port as usize;
        block_over(self.media.get(d).and_then(|m| m.get(&lba)), bases.get(d), lba)
    }
}

/// What unit `u` (a block) holds in `st`.
fn unit_of(st: &impl Blocks, u: Unit, bases: &[Arc<Image>]) -> [u8; BLOCK] {
    let Unit::Block { port, lba } = u else {
        unreachable!("only blocks are judged");
    };
    st.block(port, lba, bases)
}

/// A leaf's verdict for state `st` of the leaf: its check's failures but
/// those of its own judged blocks, then the judgements `st`'s bytes fail.
fn predicted(
    failures: &[Failure],
    judged: &[BlockJudgement],
    st: &impl Blocks,
    bases: &[Arc<Image>],
) -> Vec<Failure> {
    let own: Vec<Failure> = judged.iter().filter(|j| !j.own_ok).map(|j| j.failure()).collect();
    let mut out: Vec<Failure> = failures.iter().filter(|f| !own.contains(f)).cloned().collect();
    for j in judged {
        if !j.fits(&unit_of(st, j.unit, bases)) {
            out.push(j.failure());
        }
    }
    out
}

/// What of a check's observations the trees are given: all of them, all
/// but the judgements, only what recovery read (to show that the reads of
/// fsck and the oracle matter too), or only the units of the drive on
/// port 0 (to show that, on two drives, the other drive's matter too).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    All,
    NoJudgements,
    RecoveryReads,
    FirstDrive,
}

/// The drive (port) a unit is on.
fn port_of(u: &Unit) -> u8 {
    match *u {
        Unit::Pmr { port, .. } | Unit::Block { port, .. } => port,
    }
}

/// [`compare`], giving the trees what `keep` says of each check's
/// observations, returning what went wrong instead of failing. One drive
/// and two (`horae2`) are compared by the same walk.
fn compare_judging(w: &Workload, cfg: &RunConfig, keep: Keep) -> Compared {
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
    let bases = rec.bases();
    if cfg.mode.drives() > 1 {
        let mut ex = devices_explorer_of(&rec).expect("explorer");
        let check = |cx: &CheckContext, st: &DevicesState| check_state(cx, st);
        compare_space(&w.name, &mut ex, &rec, &bases, (&brute, &observing), keep, &check)
    } else {
        let mut ex = crashfuzz::explore::explorer_of(&rec).expect("explorer");
        let check = |cx: &CheckContext, st: &CrashState| check_state(cx, st);
        compare_space(&w.name, &mut ex, &rec, &bases, (&brute, &observing), keep, &check)
    }
}

/// Most states of a point compared (points with more are passed over).
const MOST_STATES: usize = 64;

/// [`compare_judging`] on the crash states of `ex`: at every point with
/// at most [`MOST_STATES`] states, the point's tree is built from the
/// observing checks, and every state is judged in full (`cx.0`, equal
/// states judged once) and compared with its leaf's verdict.
#[allow(clippy::type_complexity)]
fn compare_space<S: CrashSpace>(
    name: &str,
    ex: &mut S,
    rec: &crashfuzz::Recording,
    bases: &[Arc<Image>],
    cx: (&CheckContext, &CheckContext),
    keep: Keep,
    check: &dyn Fn(&CheckContext, &S::State) -> CheckOutcome,
) -> Compared
where
    S::State: Blocks,
{
    let (brute, observing) = cx;
    let mut out = Compared::default();
    let wrong = &mut out.wrong;
    let mut last = None;
    // Full verdicts by content and promises: equal states, equal verdicts.
    let mut verdicts: BTreeMap<u128, Vec<Failure>> = BTreeMap::new();
    for k in 0..ex.points() {
        // A point whose states and promises are the last one's has its
        // verdicts.
        let version = (
            ex.advance(k).expect("advance"),
            crashfuzz::oracle::promises_key(&rec.promises, k + 1),
        );
        if last.as_ref() == Some(&version) {
            continue;
        }
        let promised = version.1;
        last = Some(version);
        let (choices, left_out) = ex.choices(k, 8, 8).expect("choices");
        if left_out > 0 || choices.len() > MOST_STATES {
            continue;
        }
        let items = ex.items_at(k).expect("items");
        let mut tree = PointTree::new(&*ex, items, bases);
        let mut leaves = Vec::new();
        while let Some((id, choice)) = tree.next_node() {
            let st = ex.build(k, &choice).expect("build");
            let out = check(observing, &st);
            let mut reads = out.reads.expect("observed");
            if keep == Keep::RecoveryReads {
                reads.truncate(out.recovery_reads);
            }
            let mut judged = out.judgements;
            if keep == Keep::FirstDrive {
                reads.retain(|u| port_of(u) == 0);
                judged.retain(|j| port_of(&j.unit) == 0);
            }
            if tree.is_witness(id) {
                if out.failures.is_empty() {
                    wrong.push(format!("{name} point {k}: witness {choice:?} passes"));
                }
                continue;
            }
            if keep == Keep::NoJudgements || keep == Keep::RecoveryReads {
                judged.clear();
            }
            tree.read(id, &reads, &judged);
            leaves.push((id, reads, out.failures, judged));
        }
        assert!(!tree.too_wide());
        out.checks += leaves.len();
        for c in &choices {
            let mut st = ex.build(k, c).expect("build");
            let key = pcie_sim::content_hash::combine(&[S::content_hash(&mut st), promised]);
            let verdict = verdicts
                .entry(key)
                .or_insert_with(|| check(brute, &st).failures)
                .clone();
            let owners: Vec<_> = leaves
                .iter()
                .filter(|(id, reads, _, _)| tree.in_leaf(*id, reads, c))
                .collect();
            out.states += 1;
            out.failing += usize::from(!verdict.is_empty());
            let [(_, _, failures, judged)] = owners[..] else {
                wrong.push(format!(
                    "{name} point {k}: state {c:?} is in {} leaves",
                    owners.len()
                ));
                continue;
            };
            // The full check stops its oracle at the first failing name
            // and skips the sanity check after a failure, so where a judged
            // block fails only the verdict's outcome is compared.
            let want = predicted(failures, judged, &st, bases);
            let judged_fails = want.iter().chain(failures).any(|f| f.judged);
            let same = if judged_fails {
                want.is_empty() == verdict.is_empty()
            } else {
                want == verdict
            };
            if !same {
                wrong.push(format!(
                    "{name} point {k}: state {c:?} judged unlike its leaf: {verdict:?}, predicted {want:?}"
                ));
            }
        }
        out.points += 1;
    }
    out
}

#[test]
fn every_state_gets_its_leafs_verdict_with_each_mechanism_switched_off() {
    let (mut states, mut checks, mut failing) = (0, 0, 0);
    // Every self-check: their faults fail states on both drive profiles,
    // so a leaf whose verdict was wrongly taken for a state shows here;
    // `horae-no-joint-flush` runs `horae2`, on two drives.
    for sc in SELF_CHECKS.iter() {
        let (w, cfg) = sc.config(true).expect("self-check");
        let Compared {
            states: s, checks: c, ..
        } = compare(&w, &cfg);
        states += s;
        checks += c;
        failing += usize::from(s > 0);
    }
    eprintln!("self-checks: {states} states, {checks} checks");
    assert!(failing > 0 && states > 0);
    assert!(checks < states, "the trees checked {checks} of {states} states");
}

/// Two drives (`horae2`): the trees split by the units of both drives
/// (each block names its drive, each PMR line its port). The joint FLUSH
/// switched off fails states, and the comparison sees the same failing
/// verdicts from the leaves as from brute force; small workloads on both
/// profiles (a cached drive: block versions on each drive) keep every
/// verdict while the trees check fewer states than there are.
#[test]
fn two_drives_every_state_gets_its_leafs_verdict() {
    let sc = SELF_CHECKS
        .iter()
        .find(|sc| sc.mode.drives() > 1)
        .expect("a two-drive self-check");
    let (w, cfg) = sc.config(true).expect("self-check");
    let c = compare(&w, &cfg);
    eprintln!(
        "{} {}: {} points, {} states ({} failing), {} checks",
        w.name,
        sc.mode.name(),
        c.points,
        c.states,
        c.failing,
        c.checks
    );
    assert!(c.failing > 0, "no failing state compared: {c:?}");
    // A tree split by one drive's units only takes a leaf's verdict for
    // states that differ on the other drive: the comparison sees it.
    let one = compare_judging(&w, &cfg, Keep::FirstDrive);
    assert!(!one.wrong.is_empty(), "ignoring drive 1's units went unnoticed");
    eprintln!("first drive only: {} states judged wrongly", one.wrong.len());
    let (mut states, mut checks) = (0, 0);
    for (name, profile) in [
        ("generic_035", "flash-vwc"),
        ("generic_035", "optane-905p"),
        ("create_delete", "flash-vwc"),
    ] {
        let w = workload(name);
        let c = compare(&w, &config(ModeName::Horae2, profile));
        eprintln!(
            "horae2 {name} {profile}: {} points, {} states, {} checks",
            c.points, c.states, c.checks
        );
        assert!(c.points > 50 && c.failing == 0, "{name} {profile}: {c:?}");
        states += c.states;
        checks += c.checks;
    }
    assert!(checks < states, "the trees checked {checks} of {states} states");
}

/// Whole runs on two drives: the joint FLUSH switched off, explored by
/// what checks read and by brute force (every distinct state up to the
/// bounds booted and judged in full, no reduction but equal content),
/// finds the same kinds of violation, and every failing state the
/// reduction lists that brute force visited fails the same checks there.
#[test]
fn two_drives_find_the_violations_brute_force_finds() {
    let sc = SELF_CHECKS
        .iter()
        .find(|sc| sc.mode.drives() > 1)
        .expect("a two-drive self-check");
    let (w, cfg) = sc.config(true).expect("self-check");
    let reduced = crashfuzz::explore(&w, &cfg, &common::opts(), &w.name).expect("explore");
    let brute = crashfuzz::explore(
        &w,
        &cfg,
        &crashfuzz::ExploreOptions {
            reuse_verdicts: false,
            reuse_recovery: false,
            ..common::bounded(8, 8)
        },
        &w.name,
    )
    .expect("explore");
    assert_eq!(reduced.states_not_visited, 0, "{reduced:?}");
    assert!(reduced.reductions.iter().any(|r| r == "read-set"));
    let kinds = |r: &crashfuzz::ExploreReport| -> BTreeMap<String, std::collections::BTreeSet<String>> {
        let mut m: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
        for v in &r.violations {
            m.entry(v.id.clone()).or_default().insert(v.check.clone());
        }
        m
    };
    let (mine, theirs) = (kinds(&reduced), kinds(&brute));
    assert!(!mine.is_empty() && !theirs.is_empty(), "caught both ways");
    let all =
        |m: &BTreeMap<String, std::collections::BTreeSet<String>>| -> std::collections::BTreeSet<String> {
            m.values().flatten().cloned().collect()
        };
    assert_eq!(all(&mine), all(&theirs), "the same kinds of violation");
    let mut both = 0;
    for (id, checks) in &mine {
        if let Some(b) = theirs.get(id) {
            assert_eq!(checks, b, "{id}");
            both += 1;
        }
    }
    eprintln!(
        "{}: {} failing states listed by the reduction ({} checked), {} by brute force ({} checked), {both} in both",
        w.name,
        mine.len(),
        reduced.states_checked,
        theirs.len(),
        brute.states_checked
    );
    assert!(both > 0, "no failing state listed both ways");
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
        let Compared {
            points: p,
            states: s,
            checks: c,
            ..
        } = compare(&w, &config(mode, profile));
        total = (total.0 + p, total.1 + s, total.2 + c);
    }
    let (points, states, checks) = total;
    eprintln!("generic_035: {points} points, {states} states, {checks} checks");
    assert!(points > 50, "{points} points compared");
    assert!(checks < states, "the trees checked {checks} of {states} states");
}

/// The judged data blocks of an overwrite workload on a cached drive:
/// with the judgements the trees predict every verdict while checking a
/// handful of states; without them (the explorer taking a judged block as
/// fixed) a leaf's verdict is wrongly taken for states whose data did not
/// land.
#[test]
fn judged_blocks_keep_every_verdict_and_ignoring_them_is_caught() {
    let sc = SELF_CHECKS
        .iter()
        .find(|s| s.fault == crashfuzz::record::Fault::NoDataFlush)
        .expect("the no-data-flush self-check");
    let (w, cfg) = sc.config(true).expect("self-check");
    let Compared {
        states,
        checks,
        wrong,
        ..
    } = compare_judging(&w, &cfg, Keep::All);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checks < states);
    let wrong = compare_judging(&w, &cfg, Keep::NoJudgements).wrong;
    assert!(!wrong.is_empty(), "ignoring the judgements went unnoticed");
}

/// A tree split only by what recovery read, not by what fsck, the oracle
/// and the sanity check read after the mount, takes a leaf's verdict for
/// states that do not deserve it: the comparison sees it.
#[test]
fn ignoring_the_reads_after_the_mount_is_caught() {
    let caught = SELF_CHECKS.iter().any(|sc| {
        let (w, cfg) = sc.config(true).expect("self-check");
        !compare_judging(&w, &cfg, Keep::RecoveryReads).wrong.is_empty()
    });
    assert!(
        caught,
        "no self-check run showed the reads after the mount to matter"
    );
}

#[test]
fn a_tree_cut_by_the_budget_is_the_same_whatever_checker_finishes_first() {
    let w = workload("m9_cross_queue");
    let cfg = config(ModeName::Mq, "flash-vwc");
    let run = |jobs| {
        let o = crashfuzz::ExploreOptions {
            enumeration: crashfuzz::DriveEnumeration::ReadSets { budget: 16 },
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

/// The witness mechanism itself: a judgement that allows only what the
/// node's own state holds at a pending data block rejects the block's
/// other classes, and each rejected class becomes a witness: the least
/// state of the leaf holding that class, handed out as a witness and never
/// split.
#[test]
fn a_rejected_class_of_a_judged_block_gives_a_witness_in_that_class() {
    let w = workload("sfr_writeback");
    let cfg = config(ModeName::Mq, "flash-vwc");
    let rec = record(&w, &cfg).expect("record");
    let saved = SavedConfig::of_run(&w, &cfg);
    let cx = CheckContext {
        verdicts: None,
        recoveries: None,
        observe: true,
        ..CheckContext::for_run(&saved, &rec, true)
    };
    let base = rec.base_media.clone();
    let mut ex = crashfuzz::explore::explorer_of(&rec).expect("explorer");
    let mut witnessed = 0;
    for k in 0..ex.points() {
        let items = ex.items_at(k).expect("items");
        let mut tree = PointTree::new(&ex, items.clone(), std::slice::from_ref(&base));
        let Some((id, choice)) = tree.next_node() else {
            continue;
        };
        let st = ex.build(k, &choice).expect("build");
        let out = check_state(&cx, &st);
        let Some(j) = out.judgements.iter().find(|j| items.pending_at(j.unit)) else {
            continue;
        };
        let bases = std::slice::from_ref(&base);
        // Only the node's own bytes are allowed.
        let own = unit_of(&st, j.unit, bases);
        let strict = BlockJudgement {
            versions: vec![std::sync::Arc::new(crashfuzz::content::Content::from(
                &own[..j.start % BLOCK + j.len],
            ))]
            .into(),
            start: 0,
            own_ok: true,
            ..j.clone()
        };
        assert!(strict.fits(&own));
        let reads = out.reads.expect("observed");
        let before = tree.open();
        tree.read(id, &reads, std::slice::from_ref(&strict));
        let added = tree.open() - before;
        if added == 0 {
            continue;
        }
        // Witnesses are handed out first, flagged, hold a rejected class,
        // and are not split.
        let (wid, wchoice) = tree.next_node().expect("a witness");
        assert!(tree.is_witness(wid));
        let wst = ex.build(k, &wchoice).expect("build");
        assert!(
            !strict.fits(&unit_of(&wst, j.unit, bases)),
            "the witness holds a rejected class"
        );
        let open = tree.open();
        tree.read(wid, &reads, std::slice::from_ref(&strict));
        assert_eq!(tree.open(), open, "a witness is not split");
        witnessed += 1;
    }
    assert!(witnessed > 0, "no point had a judged block with another class");
}
