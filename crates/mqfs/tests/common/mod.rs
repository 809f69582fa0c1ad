//! Helpers shared by the model and error tests: machines with a file
//! system, remount, and a full snapshot of the tree that also checks the
//! file system's own bookkeeping (dot entries, link counts, lookup, and
//! that the bitmaps account for exactly the blocks and inodes the reachable
//! inodes hold).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::rc::Rc;

use ccnvme::{BlockDevice, Traffic};
use mqfs::testing::{format_and_mount, machine, new_fs_with, TestFs};
use mqfs::{mount, probe_options, Ctx, FileType, Fs, FsError, FsProfile, Ino, Mode};
use nvme_ctrl::SsdProfile;
use pcie_sim::{Machine, SimDuration, TraceMode};

/// The root directory's inode number.
pub const ROOT: Ino = 2;
/// Inode numbers below the first one handed out (1..=10, root included):
/// always marked used in the inode bitmap.
pub const RESERVED_INODES: u64 = 10;

/// The modes to test: every mode, or the comma-separated names in
/// `MQFS_MODES` (e.g. `MQFS_MODES=horae`).
pub fn modes() -> Vec<Mode> {
    match std::env::var("MQFS_MODES") {
        Ok(s) if !s.trim().is_empty() => s
            .split(',')
            .map(|n| Mode::from_name(n.trim()).unwrap_or_else(|| panic!("MQFS_MODES: unknown mode {n:?}")))
            .collect(),
        _ => Mode::ALL.to_vec(),
    }
}

/// A fresh file system of `mode` on `blocks` blocks and `cores` cores, or
/// `None` if the mode is not built yet (mount says `Unsupported`).
pub fn setup(mode: Mode, blocks: u64, cores: usize) -> Option<TestFs> {
    setup_with(mode, blocks, cores, 16384)
}

/// Like [`setup`], with `bytes_per_inode` for mkfs (large values give few
/// inodes).
pub fn setup_with(mode: Mode, blocks: u64, cores: usize, bytes_per_inode: u64) -> Option<TestFs> {
    setup_profile(mode, blocks, cores, bytes_per_inode, FsProfile::default())
}

/// Like [`setup_with`], mounted with `profile`.
pub fn setup_profile(
    mode: Mode,
    blocks: u64,
    cores: usize,
    bytes_per_inode: u64,
    profile: FsProfile,
) -> Option<TestFs> {
    let (ex, machine, ctrl) = machine(SsdProfile::optane_905p(), blocks, cores, TraceMode::Off, 1);
    let m2 = machine.clone();
    let r = ex
        .block_on(async move {
            let tune = |o: &mut mqfs::MkfsOptions| o.bytes_per_inode = bytes_per_inode;
            format_and_mount(&m2, mode, blocks, tune, profile).await
        })
        .unwrap_or_else(|e| panic!("{mode:?}: setup did not finish: {e}"));
    match r {
        Ok((dev, fs)) => Some(TestFs {
            ex,
            machine,
            ctrl,
            dev,
            fs,
        }),
        Err(FsError::Unsupported(why)) => {
            eprintln!("{mode:?}: skipped ({why})");
            None
        }
        Err(e) => panic!("{mode:?}: setup failed: {e}"),
    }
}

/// Unmounts `fs` cleanly, probes the device again and mounts it.
pub async fn remount(fs: Rc<Fs>, machine: &Machine, c: Ctx) -> Result<Rc<Fs>, FsError> {
    let mode = fs.mode();
    fs.unmount(c).await?;
    drop(fs);
    let dev = BlockDevice::probe(machine, 0, probe_options(mode)).await?;
    mount(&dev, c, FsProfile::default()).await
}

/// One reachable name, as `stat`, `read` and `readlink` see it.
#[derive(Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory (its size is the file system's business).
    Dir {
        /// Link count.
        links: u16,
    },
    /// A regular file.
    File {
        /// Link count.
        links: u16,
        /// Size in bytes.
        size: u64,
        /// Full contents.
        data: Vec<u8>,
    },
    /// A symbolic link.
    Symlink {
        /// Link count.
        links: u16,
        /// Size in bytes (the target's length).
        size: u64,
        /// Target.
        target: String,
    },
    /// A fifo, device or socket.
    Special {
        /// Link count.
        links: u16,
        /// Its type.
        ftype: FileType,
        /// Device number.
        rdev: u32,
    },
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Dir { links } => write!(f, "Dir(links {links})"),
            Entry::File { links, size, data } => write!(
                f,
                "File(links {links}, size {size}, {} bytes, fnv {:016x})",
                data.len(),
                fnv(data)
            ),
            Entry::Symlink { links, size, target } => {
                let t: String = target.chars().take(24).collect();
                write!(
                    f,
                    "Symlink(links {links}, size {size}, {t:?}.. ({} bytes))",
                    target.len()
                )
            }
            Entry::Special { links, ftype, rdev } => write!(f, "{ftype:?}(links {links}, rdev {rdev:#x})"),
        }
    }
}

/// The whole tree: every path, which paths share an inode, and the blocks
/// each inode holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snap {
    /// Every path except "/" (no trailing slash).
    pub entries: BTreeMap<String, Entry>,
    /// Paths naming one non-directory inode, for each inode with more than
    /// one name.
    pub groups: BTreeSet<Vec<String>>,
    /// Blocks (data and extent leaf) of each path's inode, "/" included.
    pub blocks: BTreeMap<String, u64>,
}

/// A readable list of the differences between `want` and `got` (empty if
/// equal, blocks not compared).
pub fn diff(want: &Snap, got: &Snap) -> Vec<String> {
    let mut out = Vec::new();
    for (p, w) in &want.entries {
        match got.entries.get(p) {
            None => out.push(format!("{p}: missing, want {w:?}")),
            Some(g) if g != w => {
                let mut s = format!("{p}: got {g:?}, want {w:?}");
                if let (Entry::File { data: gd, .. }, Entry::File { data: wd, .. }) = (g, w) {
                    if let Some(i) = (0..gd.len().min(wd.len())).find(|i| gd[*i] != wd[*i]) {
                        s += &format!(" (first byte difference at {i}: got {} want {})", gd[i], wd[i]);
                    }
                }
                out.push(s);
            }
            Some(_) => {}
        }
    }
    for (p, g) in &got.entries {
        if !want.entries.contains_key(p) {
            out.push(format!("{p}: unexpected {g:?}"));
        }
    }
    if want.groups != got.groups {
        out.push(format!(
            "hard-link groups: got {:?}, want {:?}",
            got.groups, want.groups
        ));
    }
    out
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Walks the whole tree of `fs` from the root and checks its bookkeeping:
/// "." and ".." of each directory, directory link counts (2 + subdirs),
/// entry types against the inodes, lookup against readdir, each
/// non-directory's link count against its names, no directory reachable
/// twice, and `statfs` against the blocks and inodes the reachable inodes
/// hold (a leaked or doubly-owned block or inode fails here).
pub async fn snapshot(fs: &Fs, c: Ctx) -> Result<Snap, String> {
    let e = |w: String| move |x: FsError| format!("{w}: {x}");
    let mut snap = Snap::default();
    let mut names: BTreeMap<Ino, Vec<String>> = BTreeMap::new();
    let mut nblocks: BTreeMap<Ino, u64> = BTreeMap::new();
    let mut links: BTreeMap<Ino, u16> = BTreeMap::new();
    let mut dirs: BTreeSet<Ino> = BTreeSet::from([ROOT]);
    let mut stack = vec![("/".to_string(), ROOT, ROOT)];
    while let Some((path, ino, parent)) = stack.pop() {
        let attr = fs.getattr(c, ino).await.map_err(e(format!("getattr {path}")))?;
        if attr.ftype != FileType::Dir {
            return Err(format!("{path}: a {:?} listed as a directory", attr.ftype));
        }
        if attr.size == 0 || attr.size % 4096 != 0 {
            return Err(format!("{path}: directory size {}", attr.size));
        }
        nblocks.insert(ino, attr.blocks);
        snap.blocks.insert(path.clone(), attr.blocks);
        let ents = fs.readdir(c, ino).await.map_err(e(format!("readdir {path}")))?;
        let dots: Vec<(&str, Ino, FileType)> = ents
            .iter()
            .take(2)
            .map(|(n, i, t)| (n.as_str(), *i, *t))
            .collect();
        if dots != [(".", ino, FileType::Dir), ("..", parent, FileType::Dir)] {
            return Err(format!(
                "{path}: dot entries {dots:?} (ino {ino}, parent {parent})"
            ));
        }
        let mut seen = BTreeSet::new();
        let mut subdirs = 0u16;
        for (name, eino, ft) in ents.into_iter().skip(2) {
            let p = join(&path, &name);
            if !seen.insert(name.clone()) {
                return Err(format!("{p}: listed twice"));
            }
            let a = fs.getattr(c, eino).await.map_err(e(format!("getattr {p}")))?;
            if a.ftype != ft {
                return Err(format!("{p}: entry says {ft:?}, inode {eino} says {:?}", a.ftype));
            }
            let l = fs.lookup(c, ino, &name).await.map_err(e(format!("lookup {p}")))?;
            if l.ino != eino {
                return Err(format!("{p}: lookup gives inode {}, readdir {eino}", l.ino));
            }
            snap.blocks.insert(p.clone(), a.blocks);
            nblocks.insert(eino, a.blocks);
            let entry = match ft {
                FileType::Dir => {
                    subdirs += 1;
                    if !dirs.insert(eino) {
                        return Err(format!("{p}: directory {eino} reachable twice"));
                    }
                    stack.push((p.clone(), eino, ino));
                    Entry::Dir { links: a.links }
                }
                FileType::File => {
                    let data = fs
                        .read(c, eino, 0, a.size as usize)
                        .await
                        .map_err(e(format!("read {p}")))?;
                    if data.len() as u64 != a.size {
                        return Err(format!("{p}: read {} bytes of {}", data.len(), a.size));
                    }
                    names.entry(eino).or_default().push(p.clone());
                    links.insert(eino, a.links);
                    Entry::File {
                        links: a.links,
                        size: a.size,
                        data,
                    }
                }
                FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
                    names.entry(eino).or_default().push(p.clone());
                    links.insert(eino, a.links);
                    Entry::Special {
                        links: a.links,
                        ftype: ft,
                        rdev: a.rdev,
                    }
                }
                FileType::Symlink => {
                    let target = fs.readlink(c, eino).await.map_err(e(format!("readlink {p}")))?;
                    names.entry(eino).or_default().push(p.clone());
                    links.insert(eino, a.links);
                    Entry::Symlink {
                        links: a.links,
                        size: a.size,
                        target,
                    }
                }
            };
            snap.entries.insert(p, entry);
        }
        if attr.links != 2 + subdirs {
            return Err(format!(
                "{path}: {} links with {subdirs} subdirectories",
                attr.links
            ));
        }
    }
    for (ino, ps) in &names {
        if links[ino] as usize != ps.len() {
            return Err(format!("inode {ino}: {} links but named by {ps:?}", links[ino]));
        }
        if ps.len() > 1 {
            let mut ps = ps.clone();
            ps.sort();
            snap.groups.insert(ps);
        }
    }
    let st = fs.statfs(c).await.map_err(e("statfs".into()))?;
    let used: u64 = nblocks.values().sum();
    if st.free_blocks + used != st.blocks {
        return Err(format!(
            "statfs: {} free of {} blocks, but the reachable inodes hold {used} (leaked {})",
            st.free_blocks,
            st.blocks,
            st.blocks as i64 - st.free_blocks as i64 - used as i64
        ));
    }
    let inodes = RESERVED_INODES + nblocks.len() as u64 - 1;
    if st.free_inodes + inodes != st.inodes {
        return Err(format!(
            "statfs: {} free of {} inodes, but {inodes} are reachable or reserved (leaked {})",
            st.free_inodes,
            st.inodes,
            st.inodes as i64 - st.free_inodes as i64 - inodes as i64
        ));
    }
    Ok(snap)
}

/// Device blocks written by overwrite + fsync pairs of one block of a
/// synced file in `mode` mounted with `profile`, one pair per entry of
/// `sleeps`, that much simulated time passing before it. The file is made
/// at a tick of the timestamp clock (4 ms in), so pairs soon after stay
/// within the tick of its last change.
pub fn overwrite_fsync_blocks(mode: Mode, profile: FsProfile, sleeps: &[SimDuration]) -> Vec<u64> {
    let t = new_fs_with(mode, SsdProfile::optane_905p(), 65536, 1, profile).unwrap();
    let (fs, m) = (t.fs.clone(), t.machine.clone());
    let sleeps = sleeps.to_vec();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        m.sim().sleep(SimDuration::from_ms(4)).await;
        let ino = fs.create_path(c, "/f").await.unwrap().ino;
        fs.write(c, ino, 0, &[7u8; 4096]).await.unwrap();
        fs.fsync(c, ino).await.unwrap();
        let mut blocks = Vec::new();
        for (i, pause) in sleeps.into_iter().enumerate() {
            m.sim().sleep(pause).await;
            let before = m.counters();
            fs.write(c, ino, 0, &[i as u8; 4096]).await.unwrap();
            fs.fsync(c, ino).await.unwrap();
            blocks.push(Traffic::from_counters(&m.counters().since(&before)).block_io);
        }
        blocks
    })
    .unwrap()
}
