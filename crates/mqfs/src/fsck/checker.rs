//! The checker: one pass over an image in the order the module docs give,
//! collecting findings.

use super::*;

/// Detailed owner searches for blocks owned twice before only counting.
const MAX_OWNER_SEARCHES: usize = 256;

pub(super) struct Checker<'a> {
    pub(super) src: &'a dyn BlockSource,
    pub(super) sb: Superblock,
    pub(super) collect: bool,
    pub(super) max_findings: usize,
    pub(super) findings: Vec<Finding>,
    pub(super) suppressed: u64,
    pub(super) suppressed_errors: u64,
    pub(super) metadata: Vec<MetaBlock>,
    pub(super) blocks_read: u64,
    pub(super) ibuf: Box<[u8; BLOCK]>,
    pub(super) xbuf: Box<[u8; BLOCK]>,
    pub(super) dbuf: Box<[u8; BLOCK]>,
    /// Data-area bits of the block bitmaps, by absolute block number.
    pub(super) disk_bbm: Bits,
    /// Inode bitmaps, by inode number - 1.
    pub(super) disk_ibm: Bits,
    /// Blocks owned by inodes, by absolute block number.
    pub(super) claimed: Bits,
    /// Blocks found owned twice.
    pub(super) conflict: Option<Bits>,
    /// Blocks owned twice already parsed as a directory block (by the
    /// first directory to reach them; the others skip them).
    pub(super) conflict_read: Option<Bits>,
    pub(super) owner_searches: usize,
    /// Steps left for loop checks of directory hard links.
    pub(super) ancestor_budget: u64,
    /// Inodes reached from the root, by inode number - 1.
    pub(super) reached: Bits,
    /// Inode-table blocks read, by `g * itable_blocks + t`.
    pub(super) itable_read: Bits,
    pub(super) info: Vec<InoInfo>,
    pub(super) dirs: Vec<DirRec>,
    pub(super) dir_ext: Vec<Extent>,
    /// (inode, first block, blocks) of every claim, to name owners.
    pub(super) claims: Vec<(u32, u64, u64)>,
    /// Unmarked inode slots that are not clean free slots, in blocks read.
    pub(super) stash: BTreeMap<u32, [u8; INODE_SIZE]>,
    pub(super) stack: Vec<u32>,
    pub(super) ents: Vec<Ent>,
    pub(super) names: Vec<u8>,
    pub(super) name_keys: Vec<(u64, u32, u8)>,
    /// (directory, the other directory naming it) for directory hard links.
    pub(super) extra_names: Vec<(u32, u32)>,
    /// (directory, what its ".." names, block) where that is not the
    /// directory it was reached from.
    pub(super) odd_dotdots: Vec<(u32, u32, u64)>,
    /// The orphan table (inodes unlinked while open, which mount frees;
    /// see [`crate::orphan`]), read with the root's inode-table block.
    pub(super) orphans: Vec<u32>,
    /// (inode, its block count, the blocks it maps) where they differ,
    /// for [`super::repair`].
    pub(super) nblocks_wrong: Vec<(u32, u32, u32)>,
}

impl<'a> Checker<'a> {
    pub(super) fn new(src: &'a dyn BlockSource, sb: Superblock, opts: &Options) -> Checker<'a> {
        let inodes = sb.inodes();
        let itable = sb.groups as u64 * sb.itable_blocks();
        Checker {
            src,
            collect: opts.collect_metadata,
            max_findings: if opts.max_findings == 0 {
                DEFAULT_MAX_FINDINGS
            } else {
                opts.max_findings
            },
            findings: Vec::new(),
            suppressed: 0,
            suppressed_errors: 0,
            metadata: Vec::new(),
            blocks_read: 0,
            ibuf: Box::new([0u8; BLOCK]),
            xbuf: Box::new([0u8; BLOCK]),
            dbuf: Box::new([0u8; BLOCK]),
            disk_bbm: Bits::new(sb.blocks),
            disk_ibm: Bits::new(inodes),
            claimed: Bits::new(sb.blocks),
            conflict: None,
            conflict_read: None,
            owner_searches: 0,
            ancestor_budget: 1 << 24,
            reached: Bits::new(inodes),
            itable_read: Bits::new(itable),
            info: vec![InoInfo::default(); inodes as usize + 1],
            dirs: Vec::new(),
            dir_ext: Vec::new(),
            claims: Vec::new(),
            stash: BTreeMap::new(),
            stack: Vec::new(),
            ents: Vec::new(),
            names: Vec::new(),
            name_keys: Vec::new(),
            extra_names: Vec::new(),
            odd_dotdots: Vec::new(),
            orphans: Vec::new(),
            nblocks_wrong: Vec::new(),
            sb,
        }
    }

    pub(super) fn add(
        &mut self,
        kind: FindingKind,
        severity: Severity,
        ino: Option<u32>,
        block: Option<u64>,
        detail: impl FnOnce() -> String,
    ) {
        if self.findings.len() >= self.max_findings {
            self.suppressed += 1;
            if severity == Severity::Error {
                self.suppressed_errors += 1;
            }
            return;
        }
        self.findings.push(Finding {
            severity,
            kind,
            ino,
            block,
            detail: detail(),
        });
    }

    pub(super) fn flag(
        &mut self,
        kind: FindingKind,
        ino: Option<u32>,
        block: Option<u64>,
        detail: impl FnOnce() -> String,
    ) {
        self.add(kind, kind.severity(), ino, block, detail);
    }

    pub(super) fn meta(&mut self, kind: MetaKind, block: u64) {
        if self.collect {
            self.metadata.push(MetaBlock { block, kind });
        }
    }

    pub(super) fn read_into(src: &dyn BlockSource, count: &mut u64, b: u64, buf: &mut [u8; BLOCK]) {
        *count += 1;
        src.read(b, buf);
    }

    pub(super) fn run(&mut self) {
        self.check_bitmaps();
        self.check_journal();
        self.inode_pass();
        self.traverse();
        self.check_links();
        self.check_inode_bitmap();
        self.check_block_bitmap();
    }

    // ---- 2. bitmaps ----

    pub(super) fn check_bitmaps(&mut self) {
        let sb = self.sb.clone();
        let ipg = sb.inodes_per_group as u64;
        for g in 0..sb.groups {
            let start = sb.group_start(g);
            let first = sb.first_data(g) - start;
            let n = sb.group_blocks(g);
            let bb = sb.block_bitmap(g);
            Checker::read_into(self.src, &mut self.blocks_read, bb, &mut self.ibuf);
            self.meta(MetaKind::BlockBitmap, bb);
            // Group metadata must be marked: a clear bit lets the allocator
            // hand out a bitmap or inode-table block.
            let (cnt, at) = clear_bits(&self.ibuf[..], 0, first);
            if let Some(a) = at.map(|x| start + x) {
                self.flag(FindingKind::BlockUsedButFree, None, Some(a), || {
                    format!("group {g}: {cnt} of its metadata blocks (the first {a}) are free in the bitmap")
                });
            }
            // Padding past the group's end.
            let (clear_pad, _) = clear_bits(&self.ibuf[..], n, 32768);
            if clear_pad > 0 {
                self.flag(FindingKind::BitmapPadding, None, Some(bb), || {
                    format!("group {g}: {clear_pad} padding bits past the group's end are clear in the block bitmap")
                });
            }
            // The data bits, by absolute block number.
            let mut i = first;
            while i < n {
                let k = (n - i).min(64);
                let v = bits_at(&self.ibuf[..], i) & ones(k);
                self.disk_bbm.or64(start + i, v);
                i += k;
            }

            let ib = sb.inode_bitmap(g);
            Checker::read_into(self.src, &mut self.blocks_read, ib, &mut self.ibuf);
            self.meta(MetaKind::InodeBitmap, ib);
            let (clear_pad, _) = clear_bits(&self.ibuf[..], ipg, 32768);
            if g == 0 {
                let reserved = (FIRST_INO - 1) as u64;
                let clear = !bits_at(&self.ibuf[..], 0) & ones(reserved.min(ipg));
                if clear != 0 {
                    let cnt = clear.count_ones();
                    self.flag(
                        FindingKind::BitmapPadding,
                        Some(clear.trailing_zeros() + 1),
                        Some(ib),
                        || format!("{cnt} reserved inodes are free in the inode bitmap"),
                    );
                }
            }
            if clear_pad > 0 {
                self.flag(FindingKind::BitmapPadding, None, Some(ib), || {
                    format!("group {g}: {clear_pad} padding bits past the last inode are clear in the inode bitmap")
                });
            }
            let base = g as u64 * ipg;
            let mut i = 0;
            while i < ipg {
                let k = (ipg - i).min(64);
                let v = bits_at(&self.ibuf[..], i) & ones(k);
                self.disk_ibm.or64(base + i, v);
                i += k;
            }
        }
    }

    // ---- 3. journal ----

    pub(super) fn check_journal(&mut self) {
        let sev = if self.sb.mode == Mode::None {
            Severity::Warning
        } else {
            Severity::Error
        };
        if self.sb.journal_damage > 0 {
            let n = self.sb.journal_damage;
            self.add(
                FindingKind::JournalDamaged,
                Severity::Error,
                None,
                Some(0),
                || format!("recovery dropped {n} damaged journal transaction(s) and what followed them"),
            );
        }
        for a in 0..self.sb.journal_areas {
            let b = self.sb.area_start(a);
            Checker::read_into(self.src, &mut self.blocks_read, b, &mut self.ibuf);
            self.meta(MetaKind::JournalSuper, b);
            if let Err(e) = AreaSuper::decode(&self.ibuf[..], a, self.sb.area_blocks) {
                self.add(FindingKind::JournalSuperCorrupt, sev, None, Some(b), || {
                    e.to_string()
                });
            }
        }
    }

    // ---- 4. inodes ----

    /// Reads inode-table block `t` of group `g` once; processes its marked
    /// inodes (and the root), stashes other slots that are not clean free
    /// slots, and records clean free slots as free.
    pub(super) fn load_itable(&mut self, g: u32, t: u64) {
        let idx = g as u64 * self.sb.itable_blocks() + t;
        if self.itable_read.get(idx) {
            return;
        }
        self.itable_read.set(idx);
        let b = self.sb.inode_table(g) + t;
        Checker::read_into(self.src, &mut self.blocks_read, b, &mut self.ibuf);
        let first_ino = g as u64 * self.sb.inodes_per_group as u64 + t * INODES_PER_BLOCK as u64 + 1;
        let mut any = false;
        for s in 0..INODES_PER_BLOCK as usize {
            let ino = (first_ino + s as u64) as u32;
            if ino == ORPHAN_INO {
                self.orphans = decode_orphans(&self.ibuf[s * INODE_SIZE..(s + 1) * INODE_SIZE]);
            }
            if ino < FIRST_INO && ino != ROOT_INO {
                continue;
            }
            let mut raw = [0u8; INODE_SIZE];
            raw.copy_from_slice(&self.ibuf[s * INODE_SIZE..(s + 1) * INODE_SIZE]);
            if ino == ROOT_INO || self.disk_ibm.get(ino as u64 - 1) {
                any = true;
                self.process_inode(ino, &raw);
            } else if self.info[ino as usize].kind == Kind::Unseen {
                let clean_free =
                    raw.iter().all(|x| *x == 0) || Inode::decode(&raw).is_ok_and(|i| i.is_free());
                if clean_free {
                    self.info[ino as usize].kind = Kind::Free;
                } else {
                    self.stash.insert(ino, raw);
                }
            }
        }
        if any {
            self.meta(MetaKind::InodeTable, b);
        }
    }

    pub(super) fn inode_pass(&mut self) {
        let ipb = INODES_PER_BLOCK as u64;
        let ipg = self.sb.inodes_per_group as u64;
        for g in 0..self.sb.groups {
            for t in 0..self.sb.itable_blocks() {
                let base = g as u64 * ipg + t * ipb;
                let mut marked = self.disk_ibm.get64(base) & ones(ipb);
                if base == 0 {
                    // Reserved inodes are not checked; the root always is.
                    marked &= !ones((FIRST_INO - 1) as u64);
                    marked |= 1 << (ROOT_INO - 1);
                }
                if marked != 0 {
                    self.load_itable(g, t);
                }
            }
        }
    }

    /// Makes sure `ino` (in range, not reserved) has been looked at.
    pub(super) fn ensure_inode(&mut self, ino: u32) {
        if self.info[ino as usize].kind != Kind::Unseen {
            return;
        }
        let i = (ino - 1) as u64;
        let ipg = self.sb.inodes_per_group as u64;
        let g = (i / ipg) as u32;
        let t = (i % ipg) / INODES_PER_BLOCK as u64;
        self.load_itable(g, t);
        if self.info[ino as usize].kind == Kind::Unseen {
            match self.stash.remove(&ino) {
                Some(raw) => self.process_inode(ino, &raw),
                None => self.info[ino as usize].kind = Kind::Free,
            }
        }
    }

    /// Claims `[start, start + len)` (inside one group's data area) for
    /// `ino`, reporting blocks already owned.
    pub(super) fn claim(&mut self, ino: u32, start: u64, len: u64) {
        if self.claimed.any_in(start, len) {
            let mut hits: Vec<(u64, u64)> = Vec::new();
            let first_word = start / 64;
            let claimed = &self.claimed;
            let mut words = Vec::new();
            Bits::for_range(start, len, |wi, m| {
                words.push(claimed.w.get(wi).copied().unwrap_or(0) & m);
            });
            runs(words.into_iter(), |a, b| {
                hits.push((first_word * 64 + a, first_word * 64 + b))
            });
            for (a, b) in hits {
                self.conflict
                    .get_or_insert_with(|| Bits::new(self.sb.blocks))
                    .set_range(a, b - a + 1);
                let owner = if self.owner_searches < MAX_OWNER_SEARCHES {
                    self.owner_searches += 1;
                    self.claims
                        .iter()
                        .find(|(_, s, l)| a >= *s && a - *s < *l)
                        .map(|c| c.0)
                } else {
                    None
                };
                self.flag(FindingKind::BlockOwnedTwice, Some(ino), Some(a), || match owner {
                    Some(o) if o == ino => format!("{} mapped twice by inode {ino}", range_text(a, b)),
                    Some(o) => format!("{} of inode {ino} owned by inode {o} too", range_text(a, b)),
                    None => format!("{} of inode {ino} owned by another inode too", range_text(a, b)),
                });
            }
        }
        self.claimed.set_range(start, len);
        self.claims.push((ino, start, len));
    }

    /// True if `[p, p + len)` lies in the data area of one group.
    pub(super) fn in_data_area(&self, p: u64, len: u64) -> bool {
        let Some(last) = len.checked_sub(1).and_then(|l| p.checked_add(l)) else {
            return false;
        };
        self.sb.is_data_block(p)
            && self.sb.is_data_block(last)
            && self.sb.group_of(p) == self.sb.group_of(last)
    }

    /// Decodes and checks one inode in use, claiming its blocks.
    pub(super) fn process_inode(&mut self, ino: u32, raw: &[u8; INODE_SIZE]) {
        let Some(slot) = self.info.get(ino as usize) else {
            return;
        };
        if slot.kind != Kind::Unseen {
            return;
        }
        let mut inode = match Inode::decode(raw) {
            Ok(i) => i,
            Err(e) => {
                let stored = rd_u32(raw, INODE_SIZE - 4);
                if stored != crc(&raw[..INODE_SIZE - 4]) {
                    self.flag(FindingKind::InodeChecksum, Some(ino), None, || {
                        "inode checksum mismatch".into()
                    });
                } else {
                    self.flag(FindingKind::BadInode, Some(ino), None, || e.to_string());
                }
                self.info[ino as usize].kind = Kind::Bad;
                return;
            }
        };
        if inode.is_free() {
            self.info[ino as usize].kind = Kind::Free;
            return;
        }
        let Some(ft) = inode.file_type() else {
            let mode = inode.mode;
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("mode {mode:o} has no file type")
            });
            self.info[ino as usize].kind = Kind::Bad;
            return;
        };
        {
            let s = &mut self.info[ino as usize];
            s.kind = Kind::of(ft);
            s.links = inode.links;
        }
        if inode.flags & FLAG_INDEX != 0 && ft != FileType::Dir {
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("index flag on a {ft:?}")
            });
        }
        let inline_flag = inode.flags & FLAG_INLINE_SYMLINK != 0;
        if inline_flag && ft != FileType::Symlink {
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("inline-symlink flag on a {ft:?}: its extents are ignored")
            });
        }

        // The extent tree's blocks.
        let mut tree = std::mem::take(&mut inode.tree);
        let extents_known = if inline_flag {
            if rd_u16(raw, 58) != 0 {
                self.flag(FindingKind::BadInode, Some(ino), None, || {
                    "inline-symlink flag with an extent tree".into()
                });
                false
            } else {
                true
            }
        } else {
            self.load_tree(ino, &mut tree)
        };
        let extents = tree.extents();

        // The extended-attribute block.
        let xattr = inode.xattr;
        if xattr != 0 {
            if !self.sb.is_data_block(xattr) {
                self.flag(FindingKind::ExtentOutOfRange, Some(ino), Some(xattr), || {
                    format!("xattr block pointer {xattr} is outside the data area")
                });
            } else {
                self.claim(ino, xattr, 1);
                self.meta(MetaKind::Xattr, xattr);
                Checker::read_into(self.src, &mut self.blocks_read, xattr, &mut self.xbuf);
                if let Err(e) = decode_xattr_block(&self.xbuf[..]) {
                    self.flag(FindingKind::XattrBlockCorrupt, Some(ino), Some(xattr), || {
                        e.to_string()
                    });
                }
            }
        }

        // The extents.
        let size = inode.size;
        let size_blocks = size.div_ceil(BLOCK as u64);
        let mut mapped = 0u64;
        let mut prev_end = 0u64;
        let mut past_eof = 0u64;
        let mut bad_ext: Option<String> = None;
        let dir_at = self.dir_ext.len();
        for (k, e) in extents.iter().enumerate() {
            let len = e.len as u64;
            let logical = e.logical as u64;
            if len == 0 {
                bad_ext.get_or_insert_with(|| format!("extent {k} has no blocks"));
                continue;
            }
            let lend = logical + len;
            if lend > 1 << 32 {
                bad_ext.get_or_insert_with(|| format!("extent {k} runs past the last file block"));
                continue;
            }
            if k > 0 && logical < prev_end {
                bad_ext.get_or_insert_with(|| format!("extent {k} overlaps or precedes the one before"));
                continue;
            }
            prev_end = lend;
            mapped += len;
            if e.unwritten && ft != FileType::File {
                bad_ext.get_or_insert_with(|| format!("extent {k} of a {ft:?} is unwritten"));
            }
            // Unwritten blocks past the end are fallocate's KEEP_SIZE
            // preallocation: they read as zeros whatever they hold.
            if lend > size_blocks && !e.unwritten {
                past_eof += lend - logical.max(size_blocks);
            }
            if !self.in_data_area(e.physical, len) {
                let p = e.physical;
                self.flag(FindingKind::ExtentOutOfRange, Some(ino), Some(p), || {
                    format!("extent {k} (blocks {p} + {len}) is not inside one group's data area")
                });
                continue;
            }
            self.claim(ino, e.physical, len);
            if ft == FileType::Dir {
                self.dir_ext.push(*e);
            }
        }
        if let Some(w) = bad_ext {
            self.flag(FindingKind::BadInode, Some(ino), None, || w);
        }
        if extents_known {
            let expect = mapped + tree.node_count() as u64 + (xattr != 0) as u64;
            if inode.nblocks as u64 != expect {
                let nb = inode.nblocks;
                self.nblocks_wrong
                    .push((ino, nb, u32::try_from(expect).unwrap_or(u32::MAX)));
                self.flag(FindingKind::BlockCountWrong, Some(ino), None, || {
                    format!("block count {nb}, but {expect} blocks are mapped")
                });
            }
        }

        match ft {
            FileType::File => {
                if size > MAX_FILE {
                    self.flag(FindingKind::BadInode, Some(ino), None, || {
                        format!("size {size} is beyond the largest file")
                    });
                }
                if past_eof > 0 {
                    self.flag(FindingKind::BlocksPastEof, Some(ino), None, || {
                        format!("{past_eof} blocks mapped past the end of file (size {size})")
                    });
                }
            }
            FileType::Dir => {
                let nblocks = size / BLOCK as u64;
                if size == 0 || size % BLOCK as u64 != 0 {
                    self.flag(FindingKind::DirSize, Some(ino), None, || {
                        format!("directory size {size} is not a positive multiple of {BLOCK}")
                    });
                } else if extents_known {
                    let covered: u64 = self.dir_ext[dir_at..]
                        .iter()
                        .map(|e| {
                            (e.logical as u64 + e.len as u64).min(nblocks) - (e.logical as u64).min(nblocks)
                        })
                        .sum();
                    if covered < nblocks {
                        self.flag(FindingKind::DirSize, Some(ino), None, || {
                            format!("directory of {nblocks} blocks has {} unmapped", nblocks - covered)
                        });
                    }
                    if prev_end > nblocks {
                        self.flag(FindingKind::DirSize, Some(ino), None, || {
                            format!("directory of {nblocks} blocks maps blocks up to {prev_end}")
                        });
                    }
                }
                let rec = DirRec {
                    ext_at: dir_at as u32,
                    ext_len: (self.dir_ext.len() - dir_at) as u32,
                    nblocks,
                    parent: 0,
                    indexed: inode.flags & FLAG_INDEX != 0,
                };
                self.info[ino as usize].dir = self.dirs.len() as u32;
                self.dirs.push(rec);
            }
            FileType::Symlink => self.check_symlink(ino, &inode, &tree, raw),
            // No data: size 0 (the decoder refuses a tree; a block count
            // other than the xattr block's is flagged above).
            FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
                if inode.size != 0 {
                    let size = inode.size;
                    self.flag(FindingKind::BadInode, Some(ino), None, || {
                        format!("{ft:?} of size {size} (special files hold no data)")
                    });
                }
            }
        }
    }

    /// Reads the blocks of `tree` (its root decoded from inode `ino`) level
    /// by level, claiming each, and checks the whole tree. False if it is
    /// damaged (flagged): its extents are then only those it could load.
    fn load_tree(&mut self, ino: u32, tree: &mut ExtentTree) -> bool {
        loop {
            let missing = match tree.missing_children() {
                Ok(m) => m,
                Err(e) => {
                    self.flag(FindingKind::BadExtentTree, Some(ino), None, || e.to_string());
                    return false;
                }
            };
            if missing.is_empty() {
                break;
            }
            for (b, depth) in missing {
                if !self.sb.is_data_block(b) {
                    self.flag(FindingKind::ExtentOutOfRange, Some(ino), Some(b), || {
                        format!("extent tree block pointer {b} is outside the data area")
                    });
                    return false;
                }
                self.claim(ino, b, 1);
                self.meta(MetaKind::ExtentNode, b);
                Checker::read_into(self.src, &mut self.blocks_read, b, &mut self.xbuf);
                if let Err(e) = decode_node(&self.xbuf[..], depth).and_then(|n| tree.attach(b, n)) {
                    self.flag(FindingKind::BadExtentTree, Some(ino), Some(b), || e.to_string());
                    return false;
                }
            }
        }
        let sb = &self.sb;
        if let Err(e) = tree.validate(&|b| sb.is_data_block(b)) {
            self.flag(FindingKind::BadExtentTree, Some(ino), None, || e.to_string());
            return false;
        }
        true
    }

    pub(super) fn check_symlink(
        &mut self,
        ino: u32,
        inode: &Inode,
        tree: &ExtentTree,
        raw: &[u8; INODE_SIZE],
    ) {
        let size = inode.size;
        if inode.flags & FLAG_INLINE_SYMLINK != 0 {
            if size == 0 || size > INLINE_SYMLINK as u64 {
                self.flag(FindingKind::BadInode, Some(ino), None, || {
                    format!("inline symlink of size {size} (1 to {INLINE_SYMLINK} fit)")
                });
                return;
            }
            let t = &raw[68..68 + size as usize];
            if !valid_target(t) {
                self.flag(FindingKind::SymlinkBadTarget, Some(ino), None, || {
                    format!(
                        "inline target {:?} is not a valid path",
                        String::from_utf8_lossy(t)
                    )
                });
            }
            return;
        }
        let shape_ok = size > 0
            && size <= BLOCK as u64
            && tree.depth() == 0
            && tree.root().len() == 1
            && tree.first().is_some_and(|e| e.logical == 0 && e.len == 1);
        if !shape_ok {
            let n = tree.extents().len();
            self.flag(FindingKind::BadInode, Some(ino), None, || {
                format!("symlink of size {size} with {n} extents (one block of 1 to {BLOCK} bytes expected)")
            });
            return;
        }
        let Some(p) = tree.first().map(|e| e.physical) else {
            return;
        };
        if !self.sb.is_data_block(p) {
            return; // reported as ExtentOutOfRange
        }
        Checker::read_into(self.src, &mut self.blocks_read, p, &mut self.xbuf);
        let t = &self.xbuf[..size as usize];
        if !valid_target(t) {
            let shown = String::from_utf8_lossy(&t[..t.len().min(32)]).into_owned();
            self.flag(FindingKind::SymlinkBadTarget, Some(ino), Some(p), || {
                format!("target of {size} bytes starting {shown:?} is not a valid path")
            });
        }
    }

    // ---- 5. the namespace ----

    pub(super) fn check_links(&mut self) {
        let n = self.reached.w.len();
        for wi in 0..n {
            let mut x = self.reached.w[wi];
            while x != 0 {
                let ino = (wi as u64 * 64 + x.trailing_zeros() as u64 + 1) as u32;
                x &= x - 1;
                let s = self.info[ino as usize];
                if !s.kind.live() {
                    continue;
                }
                let (links, refs) = (s.links as u32, s.refs);
                if links < refs {
                    self.flag(FindingKind::LinkCountTooLow, Some(ino), None, || {
                        format!("link count {links}, but {refs} entries name it")
                    });
                } else if links > refs {
                    self.flag(FindingKind::LinkCountTooHigh, Some(ino), None, || {
                        format!("link count {links}, but {refs} entries name it")
                    });
                }
            }
        }
    }

    pub(super) fn check_inode_bitmap(&mut self) {
        // A listed orphan with no link left is not a leak: mount (and
        // e2fsck) frees it.
        let orphans = self.orphans.clone();
        let n = self.disk_ibm.w.len();
        for wi in 0..n {
            let mut x = self.disk_ibm.w[wi] & !self.reached.w.get(wi).copied().unwrap_or(0);
            if wi == 0 {
                x &= !ones((FIRST_INO - 1) as u64);
            }
            while x != 0 {
                let ino = (wi as u64 * 64 + x.trailing_zeros() as u64 + 1) as u32;
                x &= x - 1;
                let info = self.info.get(ino as usize).copied();
                if orphans.contains(&ino) && info.is_some_and(|s| s.kind.live() && s.links == 0) {
                    continue;
                }
                let what = match info.map(|s| s.kind) {
                    Some(Kind::Free) | Some(Kind::Unseen) | None => "a free slot is marked in use",
                    Some(Kind::Bad) => "a damaged inode is marked in use but not reachable",
                    Some(_) => "marked in use but not reachable from the root",
                };
                self.flag(FindingKind::InodeMarkedButUnreachable, Some(ino), None, || {
                    what.into()
                });
            }
        }
    }

    pub(super) fn check_block_bitmap(&mut self) {
        let mut used_free = Vec::new();
        let mut leaked = Vec::new();
        let d = &self.disk_bbm.w;
        let c = &self.claimed.w;
        runs(c.iter().zip(d.iter()).map(|(c, d)| c & !d), |a, b| {
            used_free.push((a, b))
        });
        runs(c.iter().zip(d.iter()).map(|(c, d)| d & !c), |a, b| {
            leaked.push((a, b))
        });
        for (a, b) in used_free {
            self.flag(FindingKind::BlockUsedButFree, None, Some(a), || {
                format!("{} owned by an inode but free in the bitmap", range_text(a, b))
            });
        }
        for (a, b) in leaked {
            self.flag(FindingKind::BlockMarkedButUnused, None, Some(a), || {
                format!("{} marked in use but owned by nothing", range_text(a, b))
            });
        }
    }

    pub(super) fn finish(self) -> Report {
        let mut st = Stats::default();
        let n = self.reached.w.len();
        for wi in 0..n {
            let mut x = self.reached.w[wi];
            while x != 0 {
                let ino = wi as u64 * 64 + x.trailing_zeros() as u64 + 1;
                x &= x - 1;
                match self.info[ino as usize].kind {
                    Kind::File => st.files += 1,
                    Kind::Dir => st.dirs += 1,
                    Kind::Symlink => st.symlinks += 1,
                    _ => {}
                }
                st.used_inodes += 1;
            }
        }
        st.used_blocks = self.claimed.count();
        st.data_blocks = (0..self.sb.groups)
            .map(|g| self.sb.group_start(g) + self.sb.group_blocks(g) - self.sb.first_data(g))
            .sum();
        st.free_blocks = st.data_blocks.saturating_sub(self.disk_bbm.count());
        st.inodes = self.sb.inodes();
        st.free_inodes = st.inodes.saturating_sub(self.disk_ibm.count());
        st.blocks_read = self.blocks_read;
        let mut metadata = self.metadata;
        metadata.sort_unstable();
        metadata.dedup();
        Report {
            superblock: self.sb,
            findings: self.findings,
            suppressed: self.suppressed,
            suppressed_errors: self.suppressed_errors,
            stats: st,
            metadata,
        }
    }
}
