//! The simulator's own speed benchmark workload, one copy for the speed
//! bench (`benches/speed.rs`, `fsync_4k`) and the profiling example
//! (`examples/fsync_loop.rs`): one thread on one core appends 4 KiB to a
//! file and fsyncs, over and over, on a fresh file system of the Optane
//! 905P profile.

use mqfs::testing::{new_fs, TestFs};
use mqfs::{Ctx, Ino, Mode};
use nvme_ctrl::SsdProfile;

use crate::Error;

/// Appends + fsyncs of one run of the loop.
pub const FSYNCS: u64 = 200;

/// A fresh file system of `mode` with an empty `/f`; returns it and the
/// file's inode.
pub fn fresh(mode: Mode) -> Result<(TestFs, Ino), Error> {
    let t = new_fs(mode, SsdProfile::optane_905p(), 65536, 1)?;
    let fs = t.fs.clone();
    let ino =
        t.ex.block_on(async move { fs.create_path(Ctx::on(0), "/f").await })??
            .ino;
    Ok((t, ino))
}

/// What one run of the loop did, read off the machine.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Run {
    /// Simulated time the loop took, in seconds.
    pub simulated_secs: f64,
    /// Bus events the loop added to the trace.
    pub bus_events: u64,
    /// Task polls the loop took.
    pub polls: u64,
    /// The bus trace's hash at the end (the same for every run of a mode:
    /// a change to the simulator's speed must leave it as it was).
    pub trace_hash: u64,
}

/// Appends `n` 4 KiB blocks to `ino`, each followed by fsync.
pub fn run(t: &TestFs, ino: Ino, n: u64) -> Result<Run, Error> {
    let (start, events, polls) = (t.ex.sim().now(), t.machine.trace().len(), t.ex.polls());
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let block = [0x5au8; 4096];
        for i in 0..n {
            fs.write(c, ino, i * 4096, &block).await?;
            fs.fsync(c, ino).await?;
        }
        Ok::<(), Error>(())
    })??;
    Ok(Run {
        simulated_secs: t.ex.sim().now().since(start).as_secs_f64(),
        bus_events: t.machine.trace().len() - events,
        polls: t.ex.polls() - polls,
        trace_hash: t.machine.trace().hash(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_is_deterministic_and_moves_the_bus() {
        let one = || -> Run {
            let (t, ino) = fresh(Mode::Mq).expect("mkfs");
            run(&t, ino, 10).expect("the loop runs")
        };
        let (a, b) = (one(), one());
        assert_eq!(a, b, "the same loop on a fresh machine: the same run");
        assert!(
            a.bus_events > 10 * 20 && a.polls > 10 && a.simulated_secs > 10.0 * 5e-6,
            "{a:?}"
        );
    }
}
