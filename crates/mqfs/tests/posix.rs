//! The shared POSIX checks ([`fsapi::testing::posix`]) on MQFS in each
//! mode, through [`fsapi::FileSystem`]: results, link counts, typed
//! errors, that a refused call changes nothing, and that operations survive
//! an unmount, a power cycle and a mount.
//!
//! MQFS's own error shapes stay in `errors.rs` (symlinks, full disks, no
//! free inode, the exact variant and errno of each refusal).

use std::rc::Rc;
use std::sync::Arc;

use ccnvme::BlockDevice;
use fsapi::testing::{Adapter, Env, Medium, CTX};
use mqfs::testing::{format_and_mount, machine, machine_after};
use mqfs::{mount, probe_options, Fs, FsError, FsProfile, Mode};
use nvme_ctrl::{Controller, Media, SsdProfile};
use pcie_sim::{Executor, Machine, TraceMode};

/// The drive's blocks (64 MiB).
const BLOCKS: u64 = 16384;
/// The machine's cores.
const CORES: usize = 2;

/// A machine with one NVMe drive (an Optane 905p over memory media) on
/// port 0.
#[derive(Clone, Debug)]
struct Drive {
    ctrl: Rc<Controller>,
    seed: u64,
}

fn profile() -> SsdProfile {
    SsdProfile::optane_905p()
}

impl Medium for Drive {
    fn machine(seed: u64) -> (Executor, Machine, Drive) {
        let (ex, m, ctrl) = machine(profile(), BLOCKS, CORES, TraceMode::Off, seed);
        (ex, m, Drive { ctrl, seed })
    }

    /// A new machine whose drive holds what reached the media (the
    /// volatile write cache is lost) and whose PMR holds what it held.
    fn power_cycle<A: Adapter<Medium = Drive>>(env: &mut Env<A>) {
        let image = env.medium.ctrl.backend().media().freeze();
        let media = Media::cow(Arc::new(image), Default::default());
        let pmr = env.m.pmr_image(0);
        let seed = env.medium.seed;
        let (ex, m, ctrl) = machine_after(profile(), media, pmr, CORES, TraceMode::Off, seed);
        // The old machine goes before its executor.
        env.medium = Drive { ctrl, seed };
        env.m = m;
        env.ex = ex;
    }
}

/// MQFS in mode `Mode::ALL[I]`, formatted as the other tests format it
/// (`mqfs::testing::format_and_mount`).
struct On<const I: usize>;

impl<const I: usize> Adapter for On<I> {
    type Fs = Rc<Fs>;
    type Mount = FsProfile;
    type Medium = Drive;

    async fn mkfs(m: &Machine, _drive: &Drive) -> Result<(), FsError> {
        let (_dev, fs) = format_and_mount(m, Mode::ALL[I], BLOCKS, |_| {}, FsProfile::default()).await?;
        fs.unmount(CTX).await
    }

    async fn mount(m: &Machine, _drive: &Drive, how: FsProfile) -> Result<Rc<Fs>, FsError> {
        let dev = BlockDevice::probe(m, 0, probe_options(Mode::ALL[I])).await?;
        mount(&dev, CTX, how).await
    }

    /// What the caches hold goes to the drive (calls are durable at an
    /// fsync, not at return).
    async fn unmount(fs: Rc<Fs>) -> Result<(), FsError> {
        fs.unmount(CTX).await
    }

    /// Free (blocks, inodes), from the bitmaps.
    type Usage = (u64, u64);

    async fn usage(fs: &Rc<Fs>) -> (u64, u64) {
        let s = fs.statfs(CTX).await.expect("statfs");
        (s.free_blocks, s.free_inodes)
    }
}

/// The shared checks on `Mode::ALL[$i]`, in module `$m`. An inode no
/// entry names is `None`: its getattr is EUCLEAN (a free inode reached by
/// number is damage to MQFS), not ENOENT.
macro_rules! in_mode {
    ($m:ident, $i:literal, $mode:expr) => {
        mod $m {
            use fsapi::testing::posix;

            type A = super::On<$i>;

            fsapi::posix_tests!(A, mqfs::layout::NAME_MAX, mqfs::data::MAX_FILE, None);

            #[test]
            fn a_remount_rebuilds_the_same_tree_and_free_space() {
                let (free_blocks, free_inodes) =
                    posix::a_remount_rebuilds_the_same_tree_and_free_space::<A>();
                assert!(free_blocks > 0 && free_inodes > 0);
            }

            #[test]
            fn the_adapter_is_of_its_mode() {
                assert_eq!(mqfs::Mode::ALL[$i], $mode);
            }
        }
    };
}

in_mode!(none, 0, mqfs::Mode::None);
in_mode!(classic, 1, mqfs::Mode::Classic);
in_mode!(horae, 2, mqfs::Mode::Horae);
in_mode!(mq, 3, mqfs::Mode::Mq);
