//! CPU costs of file-system code, charged to the core of the calling
//! thread. Sources beside each number.

use fsapi::CpuCosts;
use pcie_sim::{Cycles, SimDuration};

/// Costs and knobs of the file system.
#[derive(Clone, Debug, PartialEq)]
pub struct FsProfile {
    /// What the DRAM work of a call costs: the system call (entry, VFS and
    /// exit, ~0.5 us on a 2.5 GHz Haswell with the mitigations of the
    /// paper's era), scanning one directory entry, updating an in-memory
    /// inode and its table block, allocating or freeing one block or inode
    /// in a bitmap (for a block allocation: marking it on disk,
    /// `ext4_mb_mark_diskspace_used`; an estimate). One table for every
    /// file system of the workspace ([`fsapi::CpuCosts`]: the file systems
    /// on persistent memory charge the same figures).
    pub cpu: CpuCosts,
    /// One group scanned by a run of the block allocator's regular search
    /// (`ext4_mb_regular_allocator`: the group's buddy under its lock;
    /// [`crate::mballoc`]). Estimate, not measured: three times a bitmap
    /// update.
    pub mb_search_cycles: Cycles,
    /// Taking a block from a preallocation window
    /// (`ext4_mb_use_preallocated`: a list walk under a spin lock).
    /// Estimate, not measured.
    pub mb_window_cycles: Cycles,
    /// Preallocate for regular-file data (per-inode and locality-group
    /// windows, [`crate::mballoc`]); off, every block is an exact request
    /// at its goal (as `EXT4_MB_HINT_NOPREALLOC` on every request).
    pub mb_prealloc: bool,
    /// Files up to this many blocks take their blocks from their core's
    /// locality-group window; larger ones get per-inode windows. Linux's
    /// `/sys/fs/ext4/*/mb_stream_req`, default 16
    /// (`MB_DEFAULT_STREAM_THRESHOLD`, fs/ext4/mballoc.h).
    pub mb_stream_request: u32,
    /// Blocks of a locality-group window. Linux's
    /// `/sys/fs/ext4/*/mb_group_prealloc`, default 512
    /// (`MB_DEFAULT_GROUP_PREALLOC`, fs/ext4/mballoc.h).
    pub mb_group_prealloc: u32,
    /// Fault injection only: mark a whole window in the on-disk bitmap
    /// when it is made (and never clear what a discard gives back), as a
    /// design that persisted preallocations would; a crash then leaks the
    /// unused blocks, which fsck reports. Off: only used blocks are marked
    /// (`ext4_mb_mark_diskspace_used`).
    pub mb_mark_window_on_disk: bool,
    /// Preparing one data page for I/O (Horae 6.2: "page preparation 0.8
    /// us"; Ext4's search of dirty pages, ccNVMe 7.5.2 S-iD).
    pub page_prep: SimDuration,
    /// Building one journal entry (tag, descriptor space, copy set-up).
    pub journal_block_cycles: Cycles,
    /// Waking the journal commit thread and switching back (`docs/decisions.md` H8:
    /// 2-5 us; 2 us).
    pub context_switch: SimDuration,
    /// The core the commit thread runs on (classic and Horae; HoraeFS's
    /// flush thread too).
    pub commit_core: usize,
    /// The core HoraeFS's flush thread runs on (BarrierFS's flush thread is
    /// a kernel thread of its own, which the scheduler places on an idle
    /// core when there is one); `None`: the commit thread's core.
    pub flush_core: Option<usize>,
    /// The cores of HoraeFS's background submitter threads (Horae 6.2: the
    /// ordering layer hands each ordered write's data bio to the caller's
    /// core's submitter, off the caller's core;
    /// `ccnvme::horae::StreamParams::submitters`); `None`: each caller
    /// sends its bios through the block layer itself.
    pub submitters: Option<ccnvme::horae::Submitters>,
    /// Checkpoint when a journal area is this full (percent; `docs/decisions.md` M5).
    pub checkpoint_watermark: u32,
    /// Write the classic journal's commit record with FUA (on a drive
    /// with a volatile cache the record may otherwise stay in the cache
    /// when fsync returns). Off only for fault injection.
    pub commit_fua: bool,
    /// On a striped volume, a PREFLUSH write flushes every member first, as
    /// Linux md's `md_flush_request` does ([`crate::volume::Volume`]'s
    /// `submit_write`). Off only for fault injection: the PREFLUSH reaches
    /// the written member alone, so ext4's commit record can be durable
    /// while a log block it covers is still in the other member's cache.
    pub md_flush_members: bool,
    /// Ext4's `barrier` mount option (on by default; Linux
    /// Documentation/filesystems/ext4.rst, "barrier=<0|1(*)>"). Off is
    /// `nobarrier`, the ordering variant HoRAE 6.1 compares against
    /// (ext4-OD: "only guarantees the dispatch order reaching in storage
    /// buffer"): JBD2 writes the commit record without PREFLUSH and FUA
    /// (fs/jbd2/commit.c, `JBD2_BARRIER` unset) and fsync sends no FLUSH
    /// (fs/ext4/fsync.c `ext4_sync_file`, `test_opt(.., BARRIER)`), nor does
    /// a checkpoint (fs/jbd2/checkpoint.c `jbd2_cleanup_journal_tail`); the
    /// waits for the writes stay. `classic` and `none` modes only: on a
    /// drive with a volatile cache fsync then promises no durability.
    pub barrier: bool,
    /// ext4's `data=journal` mount option (the data-journaling mode HoRAE
    /// 6.4 runs for version consistency): file data goes to the journal
    /// with the metadata, in the transaction that commits the change, and
    /// home only by the checkpoint (fs/ext4/inode.c
    /// `ext4_journalled_write_end`; fs/ext4/fsync.c: fsync is
    /// `ext4_force_commit`). `classic` and `horae` modes only, and not with
    /// [`crate::JbdCommit::CcNvmeTransaction`]; off by default (ext4's
    /// default is `data=ordered`). See [`crate::journal::jbd`].
    pub data_journal: bool,
    /// Flush at fsync and sync for data no commit covers: data that went
    /// home outside a sync since the last one (O_DIRECT, sync_file_range;
    /// see [`crate::direct`]), and, with a JBD2 journal, data fsync wrote
    /// after the transaction that last changed the inode sent its flush
    /// (ext4's `needs_barrier`, `docs/decisions.md` E11). Off only for
    /// fault injection.
    pub flush_unflushed_data: bool,
    /// HoraeFS's flush stage acknowledges a transaction (its fsync callers
    /// return) only after its writes completed and the joint FLUSH
    /// covering them (Horae 5.6.2: "HORAEFS waits for the durability of
    /// the associated blocks in flush thread, and finally issues a FLUSH").
    /// Off only for fault injection: it then acknowledges as soon as the
    /// submit stage dispatched the transaction.
    pub horae_ack_after_flush: bool,
    /// JBD2 (classic and HoraeFS) shadows the buffers it writes to the log from the
    /// live buffer (BH_Shadow): a modifier waits until that log write
    /// completes, as Linux 4.18's `do_get_write_access` (fs/jbd2/
    /// transaction.c) sleeps on `BH_Shadow`; a buffer changed after the
    /// transaction was locked has a frozen copy and is not shadowed. Off
    /// only to show the mechanism: every buffer then has a frozen copy and
    /// no modifier waits (as the model did before).
    pub jbd_shadow: bool,
    /// How the `classic` mode's JBD2 commits a transaction
    /// ([`JbdCommit`](crate::journal::jbd::JbdCommit)): with a commit
    /// record behind a FLUSH (Linux's JBD2, the default), or as one ccNVMe
    /// transaction (ccNVMe 7.5.1, Figure 13's "+ccNVMe": Ext4 with ccNVMe
    /// performing its journaling), which needs the ccNVMe driver
    /// ([`crate::mount::probe_options_for`]). The other modes ignore it.
    pub jbd_commit: crate::journal::jbd::JbdCommit,
    /// Recovery of a journal committed through ccNVMe (`mq`, and `classic`
    /// with [`JbdCommit::CcNvmeTransaction`](crate::journal::jbd::JbdCommit::CcNvmeTransaction))
    /// replays only the transactions the driver's recovery does not report
    /// unfinished (ccNVMe 5.5). Off only for fault injection: every
    /// transaction the log scan finds whole is replayed, as if its
    /// REQ_TX_COMMIT had made it durable.
    pub recovery_drops_unfinished: bool,
    /// Switches of the `mq` mode.
    pub mq: crate::journal::mq::MqOptions,
    /// How long a dirty inode's pages, or a dirty metadata buffer in mode
    /// `none`, may stay dirty before the flusher writes it home: Linux's
    /// `vm.dirty_expire_centisecs`, default 3000 (30 s;
    /// `dirty_expire_interval` in mm/page-writeback.c). See
    /// [`crate::flusher`].
    pub dirty_expire: SimDuration,
    /// How often the flusher wakes while anything is dirty: Linux's
    /// `vm.dirty_writeback_centisecs`, default 500 (5 s;
    /// `dirty_writeback_interval` in mm/page-writeback.c). `None` switches
    /// the periodic writeback off, as the sysctl's 0 does (what is dirty
    /// then goes home only by fsync, sync, a checkpoint or unmount).
    pub dirty_writeback_interval: Option<SimDuration>,
    /// The clock's base in ns since 1970: the file system's time at mount
    /// (raised to the image's newest time + 1 if older; [`crate::Fs::now_ns`]).
    /// `mqfs mount` passes the host's time; simulations keep 0, so their
    /// timestamps are simulated time and deterministic.
    pub clock_base_ns: u64,
    /// The tick of the coarse clock that file timestamps come from
    /// ([`crate::Fs::current_time`]): Linux stamps inodes with
    /// `current_time` (fs/inode.c), which reads `current_kernel_time64`,
    /// the wall time as of the last timer tick (kernel/time/timekeeping.c),
    /// so every change within one tick carries the same time, and a write
    /// that finds the file's times already equal to it dirties no inode
    /// (`file_update_time`). 4 ms: one jiffy at HZ=250, the Kconfig
    /// default (kernel/Kconfig.hz, `default HZ_250`; the papers do not say
    /// which HZ their kernels had). [`SimDuration::ZERO`] stamps with the
    /// simulated time itself, to the nanosecond.
    pub timestamp_tick: SimDuration,
    /// The block driver's profile the file system probes its devices with
    /// (its software costs, queue sizes, interrupt handling;
    /// [`crate::mount::probe_options_for`]; the mode chooses ccNVMe and
    /// the Horae PMR). Its default is the one every figure uses.
    pub driver: ccnvme::DriverProfile,
}

impl Default for FsProfile {
    fn default() -> Self {
        FsProfile {
            cpu: CpuCosts::default(),
            mb_search_cycles: Cycles(900),
            mb_window_cycles: Cycles(100),
            mb_prealloc: true,
            mb_stream_request: 16,
            mb_group_prealloc: 512,
            mb_mark_window_on_disk: false,
            page_prep: SimDuration::from_ns(800),
            journal_block_cycles: Cycles(500),
            context_switch: SimDuration::from_us(2),
            commit_core: 0,
            flush_core: None,
            submitters: None,
            checkpoint_watermark: 75,
            commit_fua: true,
            md_flush_members: true,
            barrier: true,
            data_journal: false,
            flush_unflushed_data: true,
            horae_ack_after_flush: true,
            jbd_shadow: true,
            jbd_commit: crate::journal::jbd::JbdCommit::CommitRecord,
            recovery_drops_unfinished: true,
            mq: crate::journal::mq::MqOptions::default(),
            dirty_expire: SimDuration::from_ms(30_000),
            dirty_writeback_interval: Some(SimDuration::from_ms(5_000)),
            clock_base_ns: 0,
            timestamp_tick: SimDuration::from_ms(4),
            driver: ccnvme::DriverProfile::default(),
        }
    }
}
