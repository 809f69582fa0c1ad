//! `mqfs mount --record FILE`: the mounted run as a crashfuzz saved run,
//! so that `crashfuzz explore --trace FILE` explores every crash state of
//! what real programs did, with the oracle of the built-in workloads.
//!
//! [`start`] boots the machine a [`SavedConfig`] describes (mode of the
//! image, one core per queue, the image's named drive profile, seed
//! [`crate::rig::SEED`]) with the full bus trace from power-on, and takes
//! the media and PMR content before the drive is attached as the run's
//! base images. The driver probe, the mount (with its recovery) and the
//! unmount are in the trace, so they are crash points too.
//!
//! # Contract
//!
//! The adapter hands every file-system operation to [`Recorder::begin`]
//! just before it runs on the simulated machine and to [`Recorder::end`]
//! just after it returns (trace positions [`At`]), and tells
//! [`Recorder::learned`] every name a reply gives the kernel. The recorder
//! turns requests into paths and contents and hands them to crashfuzz's
//! [`crashfuzz::PromiseBuilder`], which applies the same rules as for the
//! built-in workloads (it uses crashfuzz's public API only). So the
//! recording:
//!
//! - ends the promises about every path an operation can change before it
//!   starts: both names of a rename or link, the new or removed name, and
//!   for a write or a size change every known name of the inode;
//! - after an fsync of a file, promises the file's content, read through
//!   the file system once the sync returned, at the name the inode was last
//!   reached by (`Expect::File`); after an fdatasync the same with
//!   `if_present` (the name itself may not be durable: names are not
//!   tracked to that degree); after an fsync of a directory its entries
//!   (`Expect::Dir`);
//! - after fatomic / fdataatomic in `mq` mode, promises from the call's
//!   start that the file is one of its known versions (`Expect::Atomic`):
//!   empty, its content at each earlier persistence point, and its content
//!   at the call; in the other modes they are fsync / fdatasync. Any sync
//!   may make another file durable with it (files entangled through a
//!   shared directory or inode block travel in one transaction), so after
//!   every sync the adapter also reads the files written since their
//!   content was last noted ([`Recorder::unnoted`]) and those contents
//!   count as versions too;
//! - records every operation that changes or syncs the tree (for `crashfuzz
//!   trace` and `show`); reads are not operations, only traffic.
//!
//! # Limits
//!
//! - Promises are skipped for a sync while an operation changing its path
//!   overlapped it. The FUSE adapter serves one request at a time, so this
//!   never happens there, and "the content at the call" of fatomic is the
//!   content read after it.
//! - fdatasync promises are weaker than the built-in recorder's (always
//!   `if_present`).
//! - fatomic promises only for files made during the run, outside
//!   directories renamed during it: the durable contents of a file that
//!   existed at the mount were never read. The versions are the contents
//!   at syncs: MQFS commits nothing else on its own (no timer), but a
//!   file system that did would need versions between syncs too.
//! - Each fsync of a file stores the file's whole content in the run (and
//!   reads it, which is bus traffic when it is not cached): a program that
//!   often syncs a large file makes a large recording. The trace with
//!   payloads is held in memory until the unmount.
//! - The run is saved only at a clean unmount: a killed `mqfs mount`
//!   leaves no recording.

pub mod names;
mod recorder;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crashfuzz::{Kind, ModeName, RunConfig, SavedConfig, SavedRun};
use mqfs::{Ino, SyncKind};
use pcie_sim::{Machine, SimTime};

use crate::error::CliError;
use crate::image::{LockedImage, WriteThrough};
use crate::rig::{self, Rig};
pub use recorder::Recorder;

/// Where a run is: trace entries so far and the simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// Trace entries so far.
    pub entries: usize,
    /// Simulated time.
    pub time: SimTime,
}

impl At {
    /// Where `m` is now.
    pub fn of(m: &Machine) -> At {
        At {
            entries: m.trace().len() as usize,
            time: m.sim().now(),
        }
    }
}

/// What an operation makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Make {
    /// A regular file (create, mknod).
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A new name of this inode.
    Link(Ino),
}

/// A file-system operation as the recorder sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Req {
    /// A read (lookup, getattr, read, readdir, readlink, statfs).
    Query,
    /// Makes a name in a directory.
    Make(Make, Ino, String),
    /// Removes a name of a file.
    Unlink(Ino, String),
    /// Removes a directory (and what the same operation removed in it).
    Rmdir(Ino, String),
    /// Renames (directory, name) to (directory, name).
    Rename(Ino, String, Ino, String),
    /// Writes bytes at an offset.
    Write(Ino, u64, usize),
    /// Changes attributes; the new size, if it changes.
    Setattr(Ino, Option<u64>),
    /// A sync of a file or directory.
    Sync(Ino, SyncKind),
    /// The final unmount.
    Unmount,
}

/// An operation under way (from [`Recorder::begin`] to [`Recorder::end`]).
#[derive(Debug)]
pub struct Begun {
    id: crashfuzz::OpId,
    req: Req,
    label: String,
    core: usize,
    start: At,
    sync_path: Option<String>,
}

/// What the adapter reads for the promise of the sync that just returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    /// The file's whole content.
    File(Ino),
    /// The directory's entries.
    Dir(Ino),
}

/// What it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// A file's content.
    File(Vec<u8>),
    /// A directory's entries (without `.` and `..`).
    Dir(BTreeMap<String, Kind>),
}

/// A saved recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The file.
    pub path: PathBuf,
    /// Trace entries.
    pub entries: usize,
    /// Promises.
    pub promises: usize,
    /// Operations.
    pub ops: usize,
    /// File size in bytes.
    pub bytes: u64,
}

impl Recorded {
    /// One line for the user.
    pub fn render(&self) -> String {
        format!(
            "mqfs: recorded {} trace entries, {} promises, {} operations to {} ({} bytes); explore with `crashfuzz explore --trace {}`\n",
            self.entries,
            self.promises,
            self.ops,
            self.path.display(),
            self.bytes,
            self.path.display()
        )
    }
}

/// Fails unless `file` can be written: its directory exists and takes a
/// new file. Run before anything is mounted.
pub fn check_file(file: &Path) -> Result<(), CliError> {
    let bad = |why: String| CliError::RecordFile {
        path: file.to_path_buf(),
        why,
    };
    if file.is_dir() {
        return Err(bad("is a directory".into()));
    }
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(bad(format!("directory {} does not exist", dir.display())));
    }
    // The file the save writes first, then renames.
    let mut probe = file.as_os_str().to_owned();
    probe.push(".partial");
    std::fs::File::create(&probe).map_err(|e| bad(format!("cannot write there: {e}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Boots the machine of a recorded run over `image` (see the module docs)
/// and a recorder that saves to `file`.
pub fn start(image: &LockedImage, file: &Path) -> Result<(Rig, Rc<WriteThrough>, Recorder), CliError> {
    let h = &image.header;
    let mode = h
        .mqfs_mode()
        .map_err(|why| CliError::Usage(format!("--record: {why}")))?;
    let profile = RunConfig::profile_by_name(&h.profile).map_err(|e| CliError::Usage(e.to_string()))?;
    let name = image
        .paths
        .media
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let config = SavedConfig {
        seed: rig::SEED,
        dram_bytes: rig::DRAM_BYTES,
        ..SavedConfig::new(
            &format!("mqfs mount {name}"),
            ModeName::of_fs_mode(mode),
            profile,
            h.queues as usize,
        )
    };
    let (rig, pmr, base_pmr, base_media) = Rig::recording(image, config.machine())?;
    let run = SavedRun::new(config, rig.machine.layout(), base_pmr, base_media);
    Ok((rig, pmr, Recorder::new(run, file, mode)))
}

#[cfg(test)]
mod tests;
