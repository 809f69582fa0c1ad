//! # mqfs-cli: real programs on MQFS
//!
//! The `mqfs` command makes, checks and inspects MQFS images and mounts
//! them through FUSE, so that unmodified programs (cp, sqlite3, fio...) run
//! on the file system, on the simulated machine (CPU store path, PCIe link,
//! NVMe controller with its PMR, the ccNVMe driver). It also makes and
//! mounts images of the file systems on persistent memory (WOFS, SoupFS,
//! the PMFS-style baseline; `--fs`), served by the same adapter through
//! the shared API (see [`pm`], which lists what they lack):
//!
//! ```text
//! mqfs mkfs IMAGE [--fs mqfs] [--size 256M] [--mode mq] [--profile optane-905p] [--queues 4] [--force]
//! mqfs mkfs IMAGE --fs wofs|soupfs|pmfs [--size 256M] [--profile pm-adr|pm-eadr] [--queues 4]
//! mqfs mount IMAGE MOUNTPOINT          # foreground; Ctrl-C or `fusermount3 -u MOUNTPOINT` unmounts
//! mqfs mount IMAGE MOUNTPOINT --record run.cfz   # and save the run for `crashfuzz explore --trace run.cfz`
//! mqfs fsck IMAGE
//! mqfs fsck --repair IMAGE             # e2fsck's passes 1, 3, 4, 5 through a real mount
//! mqfs stat IMAGE
//! ```
//!
//! Exit status: 0 on success; 1 when the operation ran and failed (fsck
//! found errors, or errors remain after a repair, an I/O error); 2 on bad
//! input (bad arguments, a missing image, a directory or a file that cannot
//! be opened where an image should be, a missing mountpoint or one that is
//! already an mqfs mount, an image that is not an MQFS image, is corrupt,
//! or is in use by another `mqfs` process). Errors are one line on stderr;
//! usage screens are for `--help`.
//!
//! ## The image
//!
//! An image is three files side by side (see [`image`]):
//!
//! - `IMAGE`: the drive's media, 4 KiB block `b` at byte `b * 4096`,
//!   memory-mapped by the controller (nvme-ctrl's file-backed `Media`);
//!   on persistent memory, its bytes, offset for offset;
//! - `IMAGE.pmr`: the PMR's bytes, offset for offset (empty on persistent
//!   memory);
//! - `IMAGE.hdr`: a few `key = value` text lines (see [`header`]): the
//!   format tag, the mode, the drive profile, the number of hardware queues
//!   (= simulated cores), the media size in blocks and the PMR size.
//!
//! `mkfs` writes the header last, so an interrupted `mkfs` leaves no image.
//! Every command takes an exclusive lock on `IMAGE` (`flock`), so an image
//! is used by one `mqfs` process at a time; the kernel drops the lock when
//! the process dies.
//!
//! ## What a killed process leaves
//!
//! The files hold exactly what the simulated hardware holds in its
//! persistent parts, at every instant, so that killing `mqfs mount` (even
//! with SIGKILL) is a power failure of the simulated machine at the
//! simulated instant of the kill:
//!
//! - the media file gets a block when the drive programs it: a block still
//!   in a volatile write cache is lost, as it would be on the drive; with a
//!   power-loss-protected cache (`intel-750`) a block is written to the file
//!   when it enters the cache (`Backend::set_plp_write_through`), since the
//!   drive's capacitors would destage it;
//! - the PMR file gets a write when the write lands in the PMR
//!   (`Machine::set_pmr_write_hook`): stores still in a CPU write-combining
//!   buffer or on the link are lost, as they would be;
//! - a persistent-memory image gets a write when it enters the persistence
//!   domain (`Pmem::set_persist_hook`): a line written back or flushed
//!   into the write pending queue under ADR, every store under eADR; a
//!   store still only in the CPU cache under ADR is lost, as it would be.
//!
//! Both files are shared memory maps, so what a dead process wrote stays in
//! the host's page cache and reaches the disk; `unmount` also flushes them.
//! The one host-level deviation: the kill can interrupt the copy of one
//! 4 KiB block into the map, tearing a block the drive writes atomically.
//!
//! The simulation runs only while a request is served: each FUSE request
//! runs the executor until its operation completes (`Executor::block_on`),
//! in the FUSE thread, so simulated time stands still between requests and
//! background work of the drive (destaging a cache) advances only with
//! later requests. A request from process `pid` runs on simulated core
//! `pid % queues` (its hardware queue and, in `mq` mode, its journal area).
//!
//! ## Through FUSE
//!
//! Every operation of the file system is reachable: lookup, getattr,
//! setattr (mode, owner, size, times; `UTIME_NOW` is the file system's
//! clock), create, mknod (regular files, fifos, character and block
//! devices with their numbers, sockets), mkdir, unlink, rmdir, rename,
//! link, symlink, readlink, read, write, readdir, statfs, fsync and
//! fdatasync (the file system's own), and `fatomic` / `fdataatomic`
//! through the ioctls of [`ioctl`]. Errors map to the file system's errno
//! (`FsError::errno`). File times are nanoseconds since the epoch from the
//! file system's clock: the host's time at mount (never below the image's
//! newest time + 1, so they never go back across mounts) plus the
//! simulated time since (`docs/decisions.md` M17), unless a program sets
//! them (`cp -a`, `touch -d`).
//!
//! A file unlinked (or renamed over) while open lives on with no link
//! (`fstat` reports `st_nlink` 0) on mqfs's orphan list (`mqfs::orphan`,
//! ext4's) until its last close, as the VFS keeps an open file alive; the
//! orphans a crash left are freed by the next mount.
//!
//! ## Live figures
//!
//! While mounted, `MOUNTPOINT/.mqfs/stats` (a hidden control directory: it
//! is not listed, and the name `.mqfs` is reserved in the root) reads as
//! `name value` lines (see [`stats`]): simulated time, the FUSE requests
//! served, and the bus traffic since the mount in the columns of ccNVMe
//! Table 1 (MMIO, DMA(Q), block I/O, IRQ) plus TLPs and wire bytes. The
//! same figures are printed when the file system is unmounted.
//!
//! ## Recording
//!
//! `mqfs mount IMAGE MOUNTPOINT --record FILE` saves what the programs did
//! as a crashfuzz saved run (see [`record`] and `crashfuzz::saved`), so
//! that `crashfuzz explore --trace FILE` explores every crash state of that
//! real run with the oracle of the built-in workloads, and `crashfuzz
//! replay` / `crashfuzz trace --trace FILE` replay a state or export the
//! timeline:
//!
//! - the machine is the one the saved run describes (the image's mode,
//!   drive profile and queues, seed [`rig::SEED`], [`rig::DRAM_BYTES`]),
//!   recording the full bus trace with payloads from power-on, so probe,
//!   mount (and its recovery) and unmount are crash points too; the media
//!   and PMR content at power-on are the base every crash state starts
//!   from;
//! - each fsync of a file promises its content at the name it was reached
//!   by, each fdatasync the same if the name is there, each fsync of a
//!   directory its entries, and in `mq` mode each fatomic / fdataatomic
//!   that the file is one of its versions; a later change of the path ends
//!   the promise;
//! - every operation that changes or syncs the tree is listed (for
//!   timelines).
//!
//! FILE's directory is checked before anything is mounted (a bad one is
//! bad input, exit 2); the run is written at a clean unmount (Ctrl-C or
//! `fusermount3 -u`) and a summary line is printed with the figures. A
//! killed `mqfs mount` saves nothing. The trace stays in memory until the
//! unmount, and each fsync stores the synced file's content: record short
//! runs. Without `--record` nothing is traced.
#![deny(unsafe_code)]

pub mod cmd;
pub mod error;
pub mod fuse;
pub mod header;
pub mod image;
pub mod ioctl;
pub mod pm;
pub mod record;
pub mod rig;
pub mod stats;

pub use error::CliError;
pub use header::Header;
