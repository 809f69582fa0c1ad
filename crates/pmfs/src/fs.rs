//! The mounted file system: mkfs, mount (recovery, then a check of the
//! tree that rebuilds the free sets), transactions, and the read-only
//! queries.

use fsapi::{Errno, Meter};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use pcie_sim::{Core, Machine, PmAddr, Pmem, Purpose};

use crate::error::{PmfsError, Result};
use crate::faults::Faults;
use crate::journal::{self, DirOp, Recovered, Tx, TxStats};
use crate::layout::{
    decode_dentry, word, FileType, Geometry, Ino, Inode, LINE, MAX_PAGES, MAX_SIZE, PAGE, ROOT,
};
use crate::options::Options;

pub use fsapi::Ctx;

/// Attributes of an inode.
pub type Attr = fsapi::Attr<Ino>;

/// The attributes of inode `ino`, stored as `i`.
pub(crate) fn attr_of(ino: Ino, i: &Inode) -> Attr {
    let pages = i.ptrs.iter().filter(|&&p| p != 0).count() as u64;
    let ftype = i.ftype.unwrap_or(FileType::File);
    Attr {
        ino,
        ftype,
        perm: i.perm,
        links: i.links,
        size: if ftype == FileType::Dir {
            pages * PAGE
        } else {
            i.size
        },
        pages,
    }
}

/// How the inodes and data pages are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// Free inode slots.
    pub free_inodes: usize,
    /// Free data pages.
    pub free_pages: usize,
}

/// A directory's entries in DRAM: name to slot and inode.
pub(crate) type DirMap = BTreeMap<String, (PmAddr, Ino)>;

/// DRAM state: the free sets and the dentry cache (rebuilt at mount),
/// and the next generation.
struct State {
    free_pages: BTreeSet<u32>,
    free_inos: BTreeSet<Ino>,
    /// Every directory's entries (Linux's dcache in front of PMFS):
    /// lookups cost no persistent-memory loads.
    dirs: BTreeMap<Ino, DirMap>,
    next_gen: u32,
    last: TxStats,
}

struct Inner {
    machine: Machine,
    pm: Pmem,
    geo: Geometry,
    faults: Faults,
    /// Counts the DRAM work of each call and charges it.
    meter: Meter,
    recovered: Recovered,
    state: RefCell<State>,
    /// One operation at a time.
    gate: tokio::sync::Mutex<()>,
}

/// A mounted PMFS. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Pmfs {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Pmfs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmfs")
            .field("geometry", &self.inner.geo)
            .field("faults", &self.inner.faults)
            .finish()
    }
}

/// A directory's entries: slot address, inode, name.
pub(crate) type Dentries = Vec<(PmAddr, Ino, String)>;

impl Pmfs {
    /// Formats the persistent memory: zeroes the bitmap, journal and inode
    /// table (non-temporal stores, `sfence`), writes the root inode and
    /// then the superblock (stores, `clwb`, `sfence` each).
    pub async fn mkfs(machine: &Machine, pm: &Pmem, ctx: Ctx, inodes: u32) -> Result<Geometry> {
        let core = machine.core(ctx.core)?;
        let geo = Geometry::for_size(pm.size(), inodes)?;
        let zero = [0u8; LINE as usize];
        let mut at = 0;
        while at < geo.data_at() {
            pm.nt_store(&core, PmAddr(at), &zero, Purpose::UNTAGGED).await?;
            at += LINE;
        }
        pm.sfence(&core).await?;
        let root = Inode::new(FileType::Dir, 0o755);
        let bytes: Vec<u8> = root.encode().iter().flat_map(|w| w.to_le_bytes()).collect();
        let r = geo.inode_addr(ROOT);
        pm.store(&core, r, &bytes, Purpose::UNTAGGED).await?;
        pm.clwb(&core, r).await?;
        pm.sfence(&core).await?;
        pm.store(&core, PmAddr(0), &geo.encode(), Purpose::UNTAGGED)
            .await?;
        pm.clwb(&core, PmAddr(0)).await?;
        pm.sfence(&core).await?;
        Ok(geo)
    }

    /// Mounts: reads the superblock, rolls back an uncommitted transaction
    /// ([`journal::recover`]), then walks the tree, checking it and
    /// rebuilding the free inode and page sets.
    pub async fn mount(machine: &Machine, pm: &Pmem, ctx: Ctx, faults: Faults) -> Result<Pmfs> {
        Self::mount_with(machine, pm, ctx, Options::from(faults)).await
    }

    /// [`Pmfs::mount`] with every option.
    pub async fn mount_with(machine: &Machine, pm: &Pmem, ctx: Ctx, options: Options) -> Result<Pmfs> {
        let Options { faults, cpu } = options;
        let core = machine.core(ctx.core)?;
        let mut sb = [0u8; LINE as usize];
        pm.load(&core, PmAddr(0), &mut sb).await?;
        let geo = Geometry::decode(&sb, pm.size())?;
        let recovered = journal::recover(pm, &core, &geo, &faults).await?;
        let (free_pages, free_inos, dirs) = check_tree(pm, &core, geo).await?;
        Ok(Pmfs {
            inner: Rc::new(Inner {
                machine: machine.clone(),
                pm: pm.clone(),
                geo,
                faults,
                meter: Meter::new(machine, cpu),
                recovered,
                state: RefCell::new(State {
                    free_pages,
                    free_inos,
                    dirs,
                    next_gen: recovered.gen.wrapping_add(1).max(1),
                    last: TxStats::default(),
                }),
                gate: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The geometry.
    pub fn geometry(&self) -> Geometry {
        self.inner.geo
    }

    /// What mount's recovery did.
    pub fn recovered(&self) -> Recovered {
        self.inner.recovered
    }

    /// What the last committed transaction logged and updated.
    pub fn last_tx(&self) -> TxStats {
        self.inner.state.borrow().last
    }

    /// Free inodes and pages.
    pub fn usage(&self) -> Usage {
        let s = self.inner.state.borrow();
        Usage {
            free_inodes: s.free_inos.len(),
            free_pages: s.free_pages.len(),
        }
    }

    /// The root directory's inode number.
    pub fn root(&self) -> Ino {
        ROOT
    }

    pub(crate) fn core(&self, ctx: Ctx) -> Result<Core> {
        Ok(self.inner.machine.core(ctx.core)?)
    }

    pub(crate) fn pm(&self) -> &Pmem {
        &self.inner.pm
    }

    pub(crate) fn tx<'a>(&'a self, core: &'a Core) -> Tx<'a> {
        Tx::new(&self.inner.pm, core, self.inner.geo)
    }

    pub(crate) async fn lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.gate.lock().await
    }

    /// Takes a free data page for `tx`.
    pub(crate) fn alloc_page(&self, tx: &mut Tx<'_>) -> Result<u32> {
        let p = self
            .inner
            .state
            .borrow_mut()
            .free_pages
            .pop_first()
            .ok_or(PmfsError::Fs(Errno::NoSpace("data pages")))?;
        tx.alloc_pages.push(p);
        Ok(p)
    }

    /// Takes a free inode for `tx`.
    pub(crate) fn alloc_ino(&self, tx: &mut Tx<'_>) -> Result<Ino> {
        let i = self
            .inner
            .state
            .borrow_mut()
            .free_inos
            .pop_first()
            .ok_or(PmfsError::Fs(Errno::NoSpace("inodes")))?;
        tx.alloc_inos.push(i);
        Ok(i)
    }

    /// Ends an operation: if `r` is an error, returns the transaction's
    /// allocations; otherwise commits it (durable and atomic at return)
    /// and then frees what it freed.
    pub(crate) async fn finish<T>(&self, tx: Tx<'_>, r: Result<T>) -> Result<T> {
        self.count(&tx);
        let r = match r {
            Ok(v) => {
                let gen = self.inner.state.borrow().next_gen;
                match tx.commit(gen, &self.inner.faults).await {
                    Ok(stats) => {
                        let mut s = self.inner.state.borrow_mut();
                        if stats.log_entries > 0 {
                            s.next_gen = gen.wrapping_add(1).max(1);
                        }
                        s.last = stats;
                        s.free_pages.extend(tx.free_pages.iter().copied());
                        s.free_inos.extend(tx.free_inos.iter().copied());
                        for op in &tx.dir_ops {
                            match op {
                                DirOp::Add(d, name, slot, ino) => {
                                    s.dirs.entry(*d).or_default().insert(name.clone(), (*slot, *ino));
                                }
                                DirOp::Remove(d, name) => {
                                    if let Some(m) = s.dirs.get_mut(d) {
                                        m.remove(name);
                                    }
                                }
                                DirOp::NewDir(d) => {
                                    s.dirs.insert(*d, DirMap::new());
                                }
                                DirOp::DropDir(d) => {
                                    s.dirs.remove(d);
                                }
                            }
                        }
                        return Ok(v);
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        };
        let mut s = self.inner.state.borrow_mut();
        s.free_pages.extend(tx.alloc_pages.iter().copied());
        s.free_inos.extend(tx.alloc_inos.iter().copied());
        r
    }

    /// Counts the DRAM work of `tx` for the call it belongs to (charged
    /// when the call returns, [`fsapi::Meter`]).
    pub(crate) fn count(&self, tx: &Tx<'_>) {
        self.inner.meter.count(tx.work());
    }

    /// The meter of DRAM work.
    pub(crate) fn meter(&self) -> &Meter {
        &self.inner.meter
    }

    /// The entries of a directory whose inode is `dir`.
    pub(crate) async fn dentries(tx: &Tx<'_>, dir: &Inode) -> Result<Dentries> {
        let mut out = Vec::new();
        for &p in dir.ptrs.iter().filter(|&&p| p != 0) {
            if p > tx.geo.pages {
                return Err(PmfsError::Corrupt {
                    at: 0,
                    reason: "directory block pointer out of range",
                });
            }
            let at = tx.geo.page_addr(p - 1);
            let page = tx.load(at, PAGE as usize).await?;
            for (k, d) in page.chunks_exact(LINE as usize).enumerate() {
                if let Some((ino, name)) = decode_dentry(d) {
                    out.push((at + k as u64 * LINE, ino, name));
                }
            }
        }
        Ok(out)
    }

    /// Entry `name` of directory `parent`: its slot and inode (the inode
    /// is loaded to check it is a directory; the entry comes from the
    /// dentry cache).
    pub(crate) async fn find(&self, tx: &Tx<'_>, parent: Ino, name: &str) -> Result<(PmAddr, Ino)> {
        tx.dir_inode(parent).await?;
        tx.probe();
        if name.len() > crate::layout::NAME_MAX {
            return Err(PmfsError::Fs(Errno::NameTooLong));
        }
        self.inner
            .state
            .borrow()
            .dirs
            .get(&parent)
            .and_then(|d| d.get(name))
            .copied()
            .ok_or(PmfsError::Fs(Errno::NotFound))
    }

    /// The cached entries of directory `dir`: name, slot, inode.
    pub(crate) fn entries(&self, dir: Ino) -> Vec<(String, PmAddr, Ino)> {
        self.inner
            .state
            .borrow()
            .dirs
            .get(&dir)
            .map(|d| d.iter().map(|(n, &(s, i))| (n.clone(), s, i)).collect())
            .unwrap_or_default()
    }

    /// True if `ino` is a directory (from the dentry cache).
    pub(crate) fn is_cached_dir(&self, ino: Ino) -> bool {
        self.inner.state.borrow().dirs.contains_key(&ino)
    }

    /// The attributes of `ino`.
    pub async fn getattr(&self, ctx: Ctx, ino: Ino) -> Result<Attr> {
        let core = self.core(ctx)?;
        let tx = self.tx(&core);
        let r = tx.live_inode(ino).await.map(|i| attr_of(ino, &i));
        self.count(&tx);
        r
    }

    /// The attributes of entry `name` in `parent`.
    pub async fn lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr> {
        let core = self.core(ctx)?;
        let tx = self.tx(&core);
        let r = async {
            let (_, ino) = self.find(&tx, parent, name).await?;
            Ok(attr_of(ino, &tx.live_inode(ino).await?))
        }
        .await;
        self.count(&tx);
        r
    }

    /// The inode of entry `name` in `parent`, from the dentry cache
    /// (what path resolution uses: the inode itself is not read).
    pub async fn lookup_ino(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Ino> {
        let core = self.core(ctx)?;
        let tx = self.tx(&core);
        let r = self.find(&tx, parent, name).await.map(|e| e.1);
        self.count(&tx);
        r
    }

    /// Data pages and inode slots, in all and free.
    pub async fn statfs(&self, _ctx: Ctx) -> Result<fsapi::StatFs> {
        let (geo, usage) = (self.geometry(), self.usage());
        Ok(fsapi::StatFs {
            pages: u64::from(geo.pages),
            free_pages: usage.free_pages as u64,
            inodes: u64::from(geo.inodes),
            free_inodes: usage.free_inodes as u64,
            name_max: crate::layout::NAME_MAX as u32,
        })
    }

    /// The entries of directory `ino` (without `.` and `..`), by name.
    pub async fn readdir(&self, ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, FileType)>> {
        let core = self.core(ctx)?;
        let mut tx = self.tx(&core);
        let r = tx.dir_inode(ino).await;
        let entries = self.entries(ino);
        tx.work.dirents += entries.len() as u64;
        self.count(&tx);
        r?;
        Ok(entries
            .into_iter()
            .map(|(name, _, i)| {
                let ftype = if self.is_cached_dir(i) {
                    FileType::Dir
                } else {
                    FileType::File
                };
                (name, i, ftype)
            })
            .collect())
    }

    /// `fsync`: nothing to do, every operation is durable when it returns;
    /// checks that `ino` exists.
    pub async fn fsync(&self, ctx: Ctx, ino: Ino) -> Result<()> {
        self.getattr(ctx, ino).await.map(drop)
    }
}

fn corrupt(at: PmAddr, reason: &'static str) -> PmfsError {
    PmfsError::Corrupt { at: at.0, reason }
}

/// Walks the tree from the root and checks it: every entry names a live
/// inode, a directory is reached once, link counts match, every page
/// pointer is in range, mapped once, inside the file's size and marked in
/// the bitmap, and no live inode or marked page is unreachable. Returns
/// the free pages and inodes.
async fn check_tree(
    pm: &Pmem,
    core: &Core,
    geo: Geometry,
) -> Result<(BTreeSet<u32>, BTreeSet<Ino>, BTreeMap<Ino, DirMap>)> {
    let tx = Tx::new(pm, core, geo);
    let mut bitmap = vec![0u8; geo.bitmap_len()];
    pm.load(core, geo.bitmap_word(0), &mut bitmap).await?;
    let marked = |p: u32| bitmap[(p / 8) as usize] >> (p % 8) & 1 == 1;
    let mut table = vec![0u8; geo.inodes as usize * LINE as usize];
    pm.load(core, geo.inode_addr(0), &mut table).await?;
    let mut inodes = BTreeMap::new();
    for ino in 1..geo.inodes {
        let b = &table[ino as usize * LINE as usize..][..LINE as usize];
        let mut w = [0u64; 8];
        for (i, x) in w.iter_mut().enumerate() {
            *x = u64::from_le_bytes(word(b, 8 * i));
        }
        let at = geo.inode_addr(ino);
        let i = Inode::decode(&w).ok_or(corrupt(at, "inode of unknown type"))?;
        if i.ftype.is_some() {
            inodes.insert(ino, i);
        }
    }
    if inodes.get(&ROOT).and_then(|i| i.ftype) != Some(FileType::Dir) {
        return Err(corrupt(geo.inode_addr(ROOT), "the root is not a directory"));
    }
    let mut used_pages = BTreeSet::new();
    let mut refs: BTreeMap<Ino, u32> = BTreeMap::new();
    let mut subdirs: BTreeMap<Ino, u32> = BTreeMap::new();
    let mut seen_dirs = BTreeSet::from([ROOT]);
    let mut todo = vec![ROOT];
    let mut files = BTreeSet::new();
    let mut dirs: BTreeMap<Ino, DirMap> = BTreeMap::new();
    while let Some(d) = todo.pop() {
        let dir = inodes[&d];
        let map = dirs.entry(d).or_default();
        for (at, ino, name) in Pmfs::dentries(&tx, &dir).await? {
            let Some(i) = inodes.get(&ino) else {
                return Err(corrupt(at, "entry names a free or out-of-range inode"));
            };
            if name.contains(['/', '\0']) || name == "." || name == ".." {
                return Err(corrupt(at, "entry with an invalid name"));
            }
            if map.insert(name, (at, ino)).is_some() {
                return Err(corrupt(at, "two entries with one name"));
            }
            match i.ftype {
                Some(FileType::Dir) => {
                    if !seen_dirs.insert(ino) {
                        return Err(corrupt(at, "a directory reached twice"));
                    }
                    *subdirs.entry(d).or_default() += 1;
                    todo.push(ino);
                }
                _ => {
                    *refs.entry(ino).or_default() += 1;
                    files.insert(ino);
                }
            }
        }
    }
    for (&ino, i) in &inodes {
        let at = geo.inode_addr(ino);
        let reached = seen_dirs.contains(&ino) || files.contains(&ino);
        if !reached {
            return Err(corrupt(at, "live inode not in the tree"));
        }
        let links = match i.ftype {
            Some(FileType::Dir) => 2 + subdirs.get(&ino).copied().unwrap_or(0),
            _ => refs.get(&ino).copied().unwrap_or(0),
        };
        if links != i.links {
            return Err(corrupt(at, "link count does not match the entries"));
        }
        if i.ftype == Some(FileType::File) && i.size > MAX_SIZE {
            return Err(corrupt(at, "file larger than an inode maps"));
        }
        let in_size = if i.ftype == Some(FileType::File) {
            i.size.div_ceil(PAGE) as usize
        } else {
            MAX_PAGES
        };
        for (k, &p) in i.ptrs.iter().enumerate() {
            if p == 0 {
                continue;
            }
            if k >= in_size {
                return Err(corrupt(at, "page mapped beyond the file's size"));
            }
            let page = p - 1;
            if page >= geo.pages || !marked(page) {
                return Err(corrupt(at, "page pointer out of range or free in the bitmap"));
            }
            if !used_pages.insert(page) {
                return Err(corrupt(at, "page mapped twice"));
            }
        }
    }
    let mut free_pages = BTreeSet::new();
    for p in 0..geo.pages {
        match (marked(p), used_pages.contains(&p)) {
            (true, false) => return Err(corrupt(geo.bitmap_word(p), "page marked used but unmapped")),
            (false, _) => {
                free_pages.insert(p);
            }
            _ => {}
        }
    }
    let free_inos = (1..geo.inodes).filter(|i| !inodes.contains_key(i)).collect();
    Ok((free_pages, free_inos, dirs))
}

fsapi::delegate_file_system!(Pmfs, Ino, PmfsError, lookup_ino);
