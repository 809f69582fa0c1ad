//! Recovery-free mount (paper L231-L234): the consistent view is a valid
//! tree after any crash, so mounting only reads it, checks it and builds
//! the latest view from it. The walk is also the leak collector: every
//! line and page it reaches is claimed once, each must be allocated in the
//! bitmap, and what the bitmap has allocated that no consistent pointer
//! reaches is a leak, freed by rewriting the bitmap (and link counts above
//! the names found are lowered).

use std::collections::{BTreeMap, BTreeSet};

use fsapi::Ctx;
use pcie_sim::{Core, Machine, PmAddr, Pmem};

use crate::alloc::Alloc;
use crate::error::FsError;
use crate::fs::{SoupFs, SoupProfile};
use crate::layout::{
    bitmap_word, bucket_of, first_free_page, name_hash, parse_dentry_meta, parse_inode_head, word, Kind,
    BUCKETS, INDEX_SLOTS, I_NLINK, LINE, NAME_PER_LINE, PAGE, SB_MAGIC,
};
use crate::pm::{load_line, load_word, Batch, Faults};
use crate::state::{Dentry, Ino, Inode, PersistStats, State};

/// What the mount found and the collector did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MountReport {
    /// Inodes reachable from the root (the root included).
    pub inodes: u64,
    /// Dentries reachable.
    pub dentries: u64,
    /// Lines reachable (a page counts 64).
    pub reachable_lines: u64,
    /// Lines the bitmap had allocated that nothing reaches (freed).
    pub leaked_lines: u64,
    /// Inodes whose link count was above their names (lowered).
    pub nlink_fixed: u64,
    /// Directories with two names (a crash inside their rename).
    pub multi_named_dirs: u64,
}

fn corrupt(addr: u64, what: &'static str) -> FsError {
    FsError::Corrupt { addr, what }
}

struct Walk<'a> {
    pmem: &'a Pmem,
    core: &'a Core,
    size: u64,
    first: u64,
    bitmap: Vec<u64>,
    /// Claimed lines, by page: bits as in the bitmap.
    claimed: BTreeMap<u64, u64>,
}

impl Walk<'_> {
    /// Claims a line (or a page): in range, aligned, allocated, once.
    fn claim(&mut self, addr: u64, page: bool) -> Result<(), FsError> {
        let align = if page { PAGE } else { LINE };
        if addr % align != 0 || addr < self.first * PAGE || addr >= self.size {
            return Err(corrupt(addr, "pointer out of the data area or misaligned"));
        }
        let p = addr / PAGE;
        let bits = if page {
            u64::MAX
        } else {
            1 << ((addr % PAGE) / LINE)
        };
        if self.bitmap[p as usize] & bits != bits {
            return Err(corrupt(addr, "reachable structure is free in the bitmap"));
        }
        let c = self.claimed.entry(p).or_insert(0);
        if *c & bits != 0 {
            return Err(corrupt(addr, "structure reached twice"));
        }
        *c |= bits;
        Ok(())
    }

    async fn inode(&mut self, ino: Ino) -> Result<Inode, FsError> {
        self.claim(ino, false)?;
        let l = load_line(self.pmem, self.core, ino).await?;
        let (kind, perm) =
            parse_inode_head(word(&l, 0)).ok_or(corrupt(ino, "dentry to an uninitialized inode"))?;
        let mut i = Inode::new(kind, perm, word(&l, 4), word(&l, 3), word(&l, 5));
        i.nlink = word(&l, 1);
        i.size = word(&l, 2);
        i.cons.init = true;
        i.cons.nlink = i.nlink;
        i.cons.size = i.size;
        i.cons.root = i.root;
        match kind {
            Kind::Dir => {
                self.claim(i.root, true)?;
                i.size = 0;
                i.cons.size = 0;
            }
            Kind::File => self.blocks(ino, &mut i).await?,
            // `parse_inode_head` reads no other kind.
            Kind::Symlink | Kind::Special => return Err(corrupt(ino, "a kind SoupFS never makes")),
        }
        Ok(i)
    }

    async fn blocks(&mut self, ino: Ino, i: &mut Inode) -> Result<(), FsError> {
        let n = i.size.div_ceil(PAGE);
        if n > INDEX_SLOTS {
            return Err(corrupt(ino, "size past the index"));
        }
        // An index page stays with its file once allocated, also at size 0.
        if i.root != 0 {
            self.claim(i.root, true)?;
        }
        if n == 0 {
            return Ok(());
        }
        if i.root == 0 {
            return Err(corrupt(ino, "a size without an index page"));
        }
        let mut index = vec![0u8; (8 * n) as usize];
        self.pmem.load(self.core, PmAddr(i.root), &mut index).await?;
        for c in index.chunks_exact(8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            let b = u64::from_le_bytes(w);
            if b == 0 {
                return Err(corrupt(i.root, "null block inside the size"));
            }
            self.claim(b, true)?;
            i.blocks.push(b);
        }
        Ok(())
    }

    async fn dentry(&mut self, addr: u64) -> Result<(Dentry, u64), FsError> {
        self.claim(addr, false)?;
        let l = load_line(self.pmem, self.core, addr).await?;
        let (hash_lo, len) = parse_dentry_meta(word(&l, 3)).ok_or(corrupt(addr, "uninitialized dentry"))?;
        if len == 0 || len > crate::layout::NAME_MAX {
            return Err(corrupt(addr, "bad name length"));
        }
        let mut bytes = Vec::with_capacity(len);
        let mut names = Vec::new();
        let mut at = word(&l, 1);
        while bytes.len() < len {
            self.claim(at, false)?;
            names.push(at);
            let nl = load_line(self.pmem, self.core, at).await?;
            let take = (len - bytes.len()).min(NAME_PER_LINE);
            bytes.extend_from_slice(&nl[8..8 + take]);
            at = word(&nl, 0);
        }
        let name = String::from_utf8(bytes).map_err(|_| corrupt(addr, "name not UTF-8"))?;
        let hash = name_hash(&name);
        if hash & 0xffff_ffff != hash_lo {
            return Err(corrupt(addr, "name does not match its hash"));
        }
        let d = Dentry {
            addr,
            names,
            ino: word(&l, 0),
            name,
            hash,
        };
        Ok((d, word(&l, 2)))
    }
}

/// Walks the consistent view from the root: every inode, by number.
async fn walk(w: &mut Walk<'_>, root: Ino) -> Result<(BTreeMap<Ino, Inode>, MountReport), FsError> {
    let mut rep = MountReport::default();
    let mut inodes = BTreeMap::new();
    let mut refs: BTreeMap<Ino, u64> = BTreeMap::new();
    let r = w.inode(root).await?;
    if r.kind != Kind::Dir {
        return Err(corrupt(root, "root is not a directory"));
    }
    inodes.insert(root, r);
    let mut queue = vec![root];
    while let Some(dir) = queue.pop() {
        let bucket_page = inodes.get(&dir).map_or(0, |i: &Inode| i.root);
        let mut heads = vec![0u8; PAGE as usize];
        w.pmem.load(w.core, PmAddr(bucket_page), &mut heads).await?;
        for b in 0..BUCKETS {
            let mut at = u64::from_le_bytes(
                heads[(8 * b) as usize..(8 * b + 8) as usize]
                    .try_into()
                    .unwrap_or([0; 8]),
            );
            let mut list = Vec::new();
            while at != 0 {
                let (d, next) = w.dentry(at).await?;
                if bucket_of(d.hash) != b {
                    return Err(corrupt(at, "dentry in the wrong bucket"));
                }
                if let std::collections::btree_map::Entry::Vacant(v) = inodes.entry(d.ino) {
                    let mut i = w.inode(d.ino).await?;
                    if i.kind == Kind::Dir {
                        queue.push(d.ino);
                    } else {
                        i.parent = dir;
                    }
                    v.insert(i);
                }
                *refs.entry(d.ino).or_default() += 1;
                rep.dentries += 1;
                list.push(at);
                let di = inodes.get_mut(&dir).ok_or(corrupt(dir, "lost directory"))?;
                if di.entries.insert(d.name.clone(), d).is_some() {
                    return Err(corrupt(at, "two names alike in a directory"));
                }
                at = next;
            }
            if !list.is_empty() {
                if let Some(di) = inodes.get_mut(&dir) {
                    di.cons.buckets.insert(b, list);
                }
            }
        }
    }
    for (&ino, i) in inodes.iter_mut() {
        let n = if ino == root {
            1
        } else {
            refs.get(&ino).copied().unwrap_or(0)
        };
        if i.nlink < n {
            return Err(corrupt(ino, "fewer links than names"));
        }
        if i.kind == Kind::Dir && n > 1 {
            rep.multi_named_dirs += 1;
        }
        if i.nlink > n {
            rep.nlink_fixed += 1;
            i.nlink = n;
        }
    }
    rep.inodes = inodes.len() as u64;
    Ok((inodes, rep))
}

impl SoupFs {
    /// Mounts the file system on `pmem` (after a crash, an image from
    /// [`pcie_sim::PmemCursor`]): checks the consistent view, collects
    /// the leaks, and serves from the latest view it builds. Fails with
    /// [`FsError::Corrupt`] if the consistent view is not a valid tree.
    pub async fn mount(
        machine: &Machine,
        pmem: Pmem,
        ctx: Ctx,
        profile: SoupProfile,
        faults: Faults,
    ) -> Result<(SoupFs, MountReport), FsError> {
        let core = &machine.core(ctx.core)?;
        let size = pmem.size();
        if load_word(&pmem, core, 0).await? != SB_MAGIC {
            return Err(FsError::NotFormatted);
        }
        if load_word(&pmem, core, crate::layout::SB_SIZE).await? != size {
            return Err(corrupt(0, "superblock size is not the PM's"));
        }
        let root = load_word(&pmem, core, crate::layout::SB_ROOT).await?;
        let pages = size / PAGE;
        let mut raw = vec![0u8; (8 * pages) as usize];
        pmem.load(core, PmAddr(bitmap_word(0)), &mut raw).await?;
        let bitmap: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect();
        let first = first_free_page(size);
        let mut w = Walk {
            pmem: &pmem,
            core,
            size,
            first,
            bitmap,
            claimed: BTreeMap::new(),
        };
        let (mut inodes, mut rep) = walk(&mut w, root).await?;
        // The collector: the bitmap becomes exactly what is reachable.
        let mut b = Batch::new(&pmem, core, faults);
        let mut words = Vec::with_capacity(pages as usize);
        for p in 0..pages {
            let new = if p < first {
                u64::MAX
            } else {
                w.claimed.get(&p).copied().unwrap_or(0)
            };
            let old = w.bitmap[p as usize];
            rep.reachable_lines += u64::from(new.count_ones()) * u64::from(p >= first);
            rep.leaked_lines += u64::from((old & !new).count_ones());
            if old != new {
                b.store_word(bitmap_word(p), new).await?;
            }
            words.push(new);
        }
        let fixed: BTreeSet<Ino> = inodes
            .iter()
            .filter(|(_, i)| i.nlink != i.cons.nlink)
            .map(|(&n, _)| n)
            .collect();
        for ino in fixed {
            if let Some(i) = inodes.get_mut(&ino) {
                i.cons.nlink = i.nlink;
                b.store_word(ino + I_NLINK, i.nlink).await?;
            }
        }
        if !b.is_clean() {
            b.persist().await?;
        }
        let state = State {
            inodes,
            alloc: Alloc::from_bitmap(&words, first),
            seq: 0,
            root,
            dirty: BTreeSet::new(),
            stats: PersistStats::default(),
        };
        Ok((SoupFs::new(machine, pmem, profile, faults, state), rep))
    }
}
