//! The PM modes (`crashfuzz::pm`): crashfuzz workloads on WOFS, SoupFS
//! and PMFS pass; every PM fault switch is caught on the PM canary and its
//! violation's id replays to the same verdict; workloads the PM file
//! systems cannot run are refused whole.

use crashfuzz::builtin::resolve;
use crashfuzz::pm::{
    self, explore_pm, parse_id, replay_pm, translate, PmCampaign, PmFault, PmMode, PmOptions, PmRun,
};
use crashfuzz::Error;
use pcie_sim::PersistenceDomain;

fn one(name: &str) -> crashfuzz::Workload {
    resolve(name)
        .expect("a built-in workload")
        .into_iter()
        .next()
        .expect("one workload")
}

fn run(mode: PmMode, domain: PersistenceDomain) -> PmRun {
    PmRun {
        mode,
        domain,
        seed: 1,
        fault: None,
    }
}

#[test]
fn a_table4_workload_and_the_canary_pass_on_every_pm_mode_and_domain() {
    let opts = PmOptions {
        jobs: 2,
        ..PmOptions::default()
    };
    for w in ["generic_035", "pm_canary"] {
        for mode in PmMode::ALL {
            for (_, domain) in pm::PM_PROFILES {
                let r = explore_pm(&one(w), &run(mode, domain), &opts).expect("explore");
                assert!(
                    r.violations.is_empty(),
                    "{w} {mode:?} {domain:?}: {:?}",
                    r.violations
                );
                assert!(r.crash_points > 0 && r.states_checked > 0, "{w} {mode:?}: {r:?}");
                assert_eq!(r.mode, mode.name());
                assert_eq!(r.profile, pm::domain_name(domain));
            }
        }
    }
}

#[test]
fn a_campaign_reports_in_order_and_checks_a_repeated_translation_once() {
    // ace1-03-0 and ace1-03-1 differ only in fsync and fdatasync: both
    // are the PM file systems' fsync.
    let c = PmCampaign {
        workloads: vec![one("ace1-03-0"), one("ace1-03-1")],
        modes: vec![PmMode::Wofs],
        domains: vec![PersistenceDomain::Adr],
        seed: 1,
        fault: None,
    };
    let opts = PmOptions {
        jobs: 2,
        ..PmOptions::default()
    };
    let r = c.run(&opts, 10, None, &|_| {}).expect("campaign");
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].run, r[1].run), (10, 11));
    assert_eq!(r[1].workload, "ace1-03-1");
    assert!(r[0].states_checked > 0);
    assert_eq!(r[1].states_checked, 0);
    assert_eq!(
        r[1].states_deduplicated,
        r[0].states_checked + r[0].states_deduplicated
    );
}

#[test]
fn every_pm_fault_switch_is_caught_and_its_id_replays_to_the_same_verdict() {
    let checks = pm::pm_self_checks();
    assert_eq!(checks.len(), PmFault::all().len());
    assert_eq!(checks.len(), 14, "one per field of the three Faults structs");
    let opts = PmOptions {
        jobs: 1,
        ..PmOptions::default()
    };
    for c in checks {
        let (r, caught) = c.run(&opts).expect("explore");
        let name = c.fault.name();
        let i = caught.unwrap_or_else(|| panic!("{name}: not caught in {} states", r.states_checked));
        let v = &r.violations[i];
        assert!(v.id.contains(&format!("+{}:pm-adr:", c.fault.switch)), "{}", v.id);
        let id = parse_id(&v.id).expect("a PM id").expect("a PM id");
        assert_eq!(id.run, c.run_config());
        assert_eq!(id.point, v.crash_point);
        let replayed = replay_pm(&v.id).expect("replay").expect("a PM id");
        let why = replayed
            .verdict
            .expect_err("the replayed state breaks the promise too");
        assert!(
            v.detail.starts_with(&why),
            "{name}: replay says {why}, the run said {}",
            v.detail
        );
    }
}

#[test]
fn a_passing_state_replays_as_passing_with_its_tree() {
    // The state after the first entry where nothing pending landed.
    let id = "pm_canary:pmfs:pm-adr:1:0:p";
    let r = replay_pm(id).expect("replay").expect("a PM id");
    assert_eq!(r.verdict, Ok(()));
    assert!(r.tree.is_ok());
    assert!(replay_pm("generic_035:mq:optane-905p:1:0:f.l.m")
        .expect("a block id is not refused")
        .is_none());
}

#[test]
fn what_the_pm_file_systems_lack_refuses_the_workload() {
    for (name, word) in [("xattrs", "setxattr"), ("random", "threads")] {
        match translate(&one(name)) {
            Err(Error::PmRefused { workload, why }) => {
                assert_eq!(workload, one(name).name);
                assert!(why.contains(word), "{why}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let (setup, ops) = translate(&one("ace1-03-1")).expect("ACE translates");
    assert!(!setup.is_empty() && ops.len() == 2);
    assert!(matches!(ops[1], fsapi::crash::Op::Fsync(_)), "fdatasync is fsync");
}

#[test]
fn landed_items_encode_as_ranges_and_decode_back() {
    for l in [
        vec![],
        vec![3],
        vec![0, 1, 2, 4, 7, 8],
        (0..1000).filter(|&i| i != 8).collect(),
    ] {
        let e = pm::encode_landed(&l);
        assert_eq!(pm::decode_landed(&e), Some(l.clone()), "{e}");
    }
    assert_eq!(pm::encode_landed(&[0, 1, 2, 4, 7, 8]), "p0-2.4.7-8");
    for bad in ["0-2", "p2-1", "p3.1", "px", "p1-2.2"] {
        assert_eq!(pm::decode_landed(bad), None, "{bad}");
    }
}

#[test]
fn pm_fault_names_are_the_fields_of_the_faults_structs() {
    for f in [
        "wofs-skip-clwb",
        "pmfs-skip-commit",
        "soupfs-publish-before-init",
        "wofs-skip-crc-check",
    ] {
        assert_eq!(PmFault::parse(f).map(|p| p.name()), Some(f.to_string()));
    }
    assert_eq!(PmFault::parse("wofs-skip-commit"), None);
    assert!(PmRun::parse("wofs+skip-clwb", "pm-eadr", 3)
        .expect("a PM label")
        .is_some_and(|r| r.domain == PersistenceDomain::Eadr && r.seed == 3));
    assert!(PmRun::parse("mq", "pm-adr", 1).expect("not PM").is_none());
}
