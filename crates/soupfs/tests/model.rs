//! Model-based test: random system calls against a reference model of
//! the namespace and file contents, with the persister running between
//! them; the latest view matches the model after every call's result,
//! and after `sync` a fresh mount of the persistent image matches it too,
//! with nothing leaked.

mod common;

use common::model::{dump, expected, step, Model};
use fsapi::Ctx;
use pcie_sim::{Executor, Machine, MachineProfile, Pmem, SimDuration, TraceMode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use soupfs::{Faults, FsError, SoupFs, SoupProfile};

fn run_model(seed: u64, steps: usize) {
    let ex = Executor::new(seed);
    let mach = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
    let pm = Pmem::attach(&mach, common::pm_profile()).expect("attach");
    let core = Ctx::on(0);
    let pcore = Ctx::on(1);
    let sim = mach.sim();
    let pm2 = pm.clone();
    ex.block_on(async move {
        let fs = SoupFs::mkfs(
            &mach,
            pm2.clone(),
            core,
            SoupProfile::default(),
            Faults::default(),
        )
        .await?;
        fs.start_persister(pcore)?;
        let mut m = Model::default();
        m.dirs.insert("/".into());
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for i in 0..steps {
            let what = step(&fs, core, &mut m, &mut rng).await?;
            assert_eq!(
                dump(&fs, core).await?,
                expected(&m),
                "seed {seed} step {i}: {what}"
            );
            if rng.gen_bool(0.2) {
                sim.sleep(SimDuration::from_us(rng.gen_range(100..1500))).await;
            }
        }
        fs.sync(core).await?;
        fs.stop_persister();
        let img = pm2.persistent_image();
        let pm3 = Pmem::attach_with_image(&mach, common::pm_profile(), img)?;
        let (fs2, rep) = SoupFs::mount(&mach, pm3, core, SoupProfile::default(), Faults::default()).await?;
        assert_eq!(rep.leaked_lines, 0, "seed {seed}: {rep:?}");
        assert_eq!(rep.nlink_fixed, 0, "seed {seed}: {rep:?}");
        assert_eq!(
            dump(&fs2, core).await?,
            expected(&m),
            "seed {seed}: the remounted image"
        );
        Ok::<_, FsError>(())
    })
    .expect("simulation")
    .expect("model run");
}

#[test]
fn random_calls_match_the_model_and_the_persisted_image_matches_after_sync() {
    let seeds: u64 = std::env::var("SOUPFS_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    for seed in 0..seeds {
        run_model(seed, 150);
    }
}
