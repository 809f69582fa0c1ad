//! fsck: fresh and populated images are clean in every mode with the
//! stats the workload made, and deliberate damage is found with the
//! right kind and severity.

mod surgery;
use surgery::{get, put, set_bit, superblock};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;
use std::time::Instant;

use mqfs::fsck::{fsck, fsck_with, FindingKind, MetaKind, Options, Report, Severity};
use mqfs::layout::{
    decode_dir_block, decode_node, encode_dir_block, encode_node, DirEntry, Extent, Inode, BLOCK, INODE_SIZE,
    ROOT_INO,
};
use mqfs::testing::new_fs;
use mqfs::{Ctx, FileType, Fs, FsError, Ino, Mode, StatFs};
use nvme_ctrl::SsdProfile;

const BLOCKS: u64 = 16384;

/// The modes to check: none, classic and horae, and mq once it mounts.
fn modes() -> Vec<Mode> {
    let mut v = vec![Mode::None, Mode::Classic, Mode::Horae];
    if new_fs(Mode::Mq, SsdProfile::optane_905p(), 4096, 2).is_ok() {
        v.push(Mode::Mq);
    }
    v
}

fn show(r: &Report) -> String {
    r.to_string()
}

/// What the tree holds, counted through the file system's own API.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tree {
    files: u64,
    dirs: u64,
    symlinks: u64,
    blocks: u64,
    inodes: u64,
}

async fn walk(fs: &Fs, c: Ctx) -> Tree {
    let mut seen = BTreeSet::new();
    let mut t = Tree::default();
    let mut stack = vec![ROOT_INO];
    seen.insert(ROOT_INO);
    while let Some(d) = stack.pop() {
        let a = fs.getattr(c, d).await.unwrap();
        t.dirs += 1;
        t.inodes += 1;
        t.blocks += a.blocks;
        for (name, ino, ft) in fs.readdir(c, d).await.unwrap() {
            if name == "." || name == ".." || !seen.insert(ino) {
                continue;
            }
            match ft {
                FileType::Dir => stack.push(ino),
                FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
                    unreachable!("these tests make no special files")
                }
                FileType::File | FileType::Symlink => {
                    let a = fs.getattr(c, ino).await.unwrap();
                    t.inodes += 1;
                    t.blocks += a.blocks;
                    if ft == FileType::File {
                        t.files += 1;
                    } else {
                        t.symlinks += 1;
                    }
                }
            }
        }
    }
    t
}

/// Creates, writes (a file of many extents among them), links, renames,
/// unlinks, removes directories, makes short and long symlinks and
/// truncates. Returns the inode numbers of interesting paths.
async fn workload(fs: &Fs, c: Ctx) -> BTreeMap<&'static str, Ino> {
    let blk = |i: u64| vec![(i % 251) as u8 + 1; BLOCK];
    for d in [
        "/d1",
        "/d1/d2",
        "/d3",
        "/tmpdir",
        "/d1/d2/d4",
        "/d1/victim",
        "/d3/emptyd",
    ] {
        fs.mkdir_path(c, d).await.unwrap();
    }
    fs.create_path(c, "/f1").await.unwrap();
    let data: Vec<u8> = (0..10000u32).map(|i| (i % 253) as u8).collect();
    fs.write_path(c, "/f1", 0, &data).await.unwrap();
    // Every other block: one extent each, 24 of them (in the leaf block).
    for name in ["/d1/big", "/d1/big2"] {
        fs.create_path(c, name).await.unwrap();
        let n = if name == "/d1/big" { 24 } else { 12 };
        for i in 0..n {
            fs.write_path(c, name, 2 * i * BLOCK as u64, &blk(i))
                .await
                .unwrap();
        }
    }
    fs.create_path(c, "/d1/sparse").await.unwrap();
    fs.write_path(c, "/d1/sparse", 1 << 20, b"far away")
        .await
        .unwrap();
    fs.link_path(c, "/f1", "/d1/f1link").await.unwrap();
    fs.link_path(c, "/f1", "/d3/f1link2").await.unwrap();
    // Enough long names for several directory blocks in /d3.
    for i in 0..150 {
        let p = format!("/d3/a-rather-long-file-name-to-fill-directory-blocks-quickly-{i:04}");
        fs.create_path(c, &p).await.unwrap();
        if i % 10 == 0 {
            fs.write_path(c, &p, 0, &blk(i)).await.unwrap();
        }
    }
    for i in (0..150).step_by(3) {
        let p = format!("/d3/a-rather-long-file-name-to-fill-directory-blocks-quickly-{i:04}");
        fs.unlink_path(c, &p).await.unwrap();
    }
    fs.rename_path(c, "/d1/d2", "/d3/d2moved").await.unwrap();
    fs.rename_path(c, "/f1", "/f1renamed").await.unwrap();
    for n in ["/r1", "/r2"] {
        fs.create_path(c, n).await.unwrap();
        fs.write_path(c, n, 0, n.as_bytes()).await.unwrap();
    }
    fs.rename_path(c, "/r1", "/r2").await.unwrap();
    fs.rename_path(c, "/d3/emptyd", "/d1/victim").await.unwrap();
    fs.rmdir_path(c, "/tmpdir").await.unwrap();
    let root = ROOT_INO;
    fs.symlink(c, root, "s1", "d1/big").await.unwrap();
    let d1 = fs.resolve(c, "/d1").await.unwrap();
    fs.symlink(c, d1, "s2", &"x/".repeat(150)).await.unwrap();
    fs.symlink(c, root, "s3", &"y".repeat(200)).await.unwrap();
    fs.unlink_path(c, "/s3").await.unwrap();
    let big = fs.resolve(c, "/d1/big").await.unwrap();
    fs.truncate(c, big, 5 * BLOCK as u64).await.unwrap();
    let sparse = fs.resolve(c, "/d1/sparse").await.unwrap();
    fs.truncate(c, sparse, 3 << 20).await.unwrap();
    let f1 = fs.resolve(c, "/f1renamed").await.unwrap();
    fs.truncate(c, f1, 5000).await.unwrap();
    fs.unlink_path(c, "/d3/f1link2").await.unwrap();
    assert_eq!(
        fs.readlink(c, fs.resolve(c, "/d1/s2").await.unwrap())
            .await
            .unwrap(),
        "x/".repeat(150)
    );

    let mut inos = BTreeMap::new();
    for p in [
        "/d1",
        "/d3",
        "/d3/d2moved",
        "/d3/d2moved/d4",
        "/d1/victim",
        "/f1renamed",
        "/r2",
        "/d1/big",
        "/d1/big2",
        "/d1/sparse",
        "/s1",
        "/d1/s2",
    ] {
        inos.insert(p, fs.resolve(c, p).await.unwrap());
    }
    inos
}

/// A populated, cleanly unmounted image.
struct Populated {
    image: Vec<u8>,
    inos: BTreeMap<&'static str, Ino>,
    tree: Tree,
    statfs: StatFs,
    report: Report,
}

fn populate(mode: Mode) -> Populated {
    let t = new_fs(mode, SsdProfile::optane_905p(), BLOCKS, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    let fs = t.fs.clone();
    let (inos, tree, statfs) =
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let inos = workload(&fs, c).await;
            let tree = walk(&fs, c).await;
            let statfs = fs.statfs(c).await.unwrap();
            fs.unmount(c).await.unwrap();
            (inos, tree, statfs)
        })
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    let backend = t.ctrl.backend();
    let report = fsck(&**backend).unwrap();
    let mut image = vec![0u8; BLOCKS as usize * BLOCK];
    let mut buf = [0u8; BLOCK];
    for b in 0..BLOCKS {
        backend.peek(b, &mut buf);
        image[b as usize * BLOCK..(b as usize + 1) * BLOCK].copy_from_slice(&buf);
    }
    Populated {
        image,
        inos,
        tree,
        statfs,
        report,
    }
}

/// The classic-mode image the damage tests start from.
fn base() -> &'static Populated {
    static P: OnceLock<Populated> = OnceLock::new();
    P.get_or_init(|| populate(Mode::Classic))
}

// ---- image surgery ----

fn raw_inode(img: &[u8], ino: Ino) -> (u64, usize, [u8; INODE_SIZE]) {
    let (b, off) = superblock(img).inode_location(ino).unwrap();
    let mut raw = [0u8; INODE_SIZE];
    raw.copy_from_slice(&get(img, b)[off..off + INODE_SIZE]);
    (b, off, raw)
}

/// An inode with its whole extent tree loaded, and its extents (which a
/// test may edit in place: [`put_inode`] writes them back into the same
/// tree).
struct Loaded {
    inode: Inode,
    extents: Vec<Extent>,
}

impl std::ops::Deref for Loaded {
    type Target = Inode;
    fn deref(&self) -> &Inode {
        &self.inode
    }
}

impl std::ops::DerefMut for Loaded {
    fn deref_mut(&mut self) -> &mut Inode {
        &mut self.inode
    }
}

/// The inode with its extent tree.
fn inode(img: &[u8], ino: Ino) -> Loaded {
    let (_, _, raw) = raw_inode(img, ino);
    let mut i = Inode::decode(&raw).unwrap();
    loop {
        let missing = i.tree.missing_children().unwrap();
        if missing.is_empty() {
            break;
        }
        for (b, depth) in missing {
            i.tree
                .attach(b, decode_node(&get(img, b)[..], depth).unwrap())
                .unwrap();
        }
    }
    let extents = i.tree.extents();
    Loaded { inode: i, extents }
}

/// Writes `i` back (its tree's leaves too), with valid checksums.
fn put_inode(img: &mut [u8], ino: Ino, i: &Loaded) {
    let (b, off, _) = raw_inode(img, ino);
    let mut inode = i.inode.clone();
    inode.tree.overwrite_extents(&i.extents);
    let mut blk = get(img, b);
    blk[off..off + INODE_SIZE].copy_from_slice(&inode.encode());
    put(img, b, &blk);
    for (leaf, depth, node) in inode.tree.take_dirty() {
        put(img, leaf, &encode_node(node, depth));
    }
}

fn bit(img: &[u8], block: u64, bit: u64) -> bool {
    get(img, block)[(bit / 8) as usize] & (1 << (bit % 8)) != 0
}

/// The first block of directory `dir` holding an entry named `name`, with
/// its entries.
fn dir_block_with(img: &[u8], dir: Ino, name: &str) -> (u64, Vec<DirEntry>) {
    let d = inode(img, dir);
    for e in &d.extents {
        for k in 0..e.len as u64 {
            let b = e.physical + k;
            let entries = decode_dir_block(&get(img, b)[..]).unwrap();
            if entries.iter().any(|x| x.name == name.as_bytes()) {
                return (b, entries);
            }
        }
    }
    panic!("no entry {name} in directory {dir}");
}

fn put_dir(img: &mut [u8], b: u64, entries: &[DirEntry]) {
    put(img, b, &encode_dir_block(entries).unwrap());
}

fn check(img: &[u8]) -> Report {
    fsck(&img).unwrap()
}

fn only_errors_of(r: &Report, kinds: &[FindingKind]) {
    assert!(!r.is_clean(), "{}", show(r));
    for e in r.errors() {
        assert!(kinds.contains(&e.kind), "unexpected error {e}\n{}", show(r));
    }
}

// ---- clean images ----

#[test]
fn fresh_fs_is_clean_in_every_mode() {
    for mode in modes() {
        let t =
            new_fs(mode, SsdProfile::optane_905p(), BLOCKS, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let r = fsck(&**t.ctrl.backend()).unwrap();
        assert!(r.is_spotless(), "{mode:?} mounted:\n{}", show(&r));
        assert_eq!(r.superblock.mode, mode);
        assert_eq!((r.stats.files, r.stats.dirs, r.stats.symlinks), (0, 1, 0));
        assert_eq!((r.stats.used_blocks, r.stats.used_inodes), (1, 1));
        assert_eq!(r.stats.free_blocks, r.stats.data_blocks - 1);
        assert_eq!(r.stats.free_inodes, r.stats.inodes - 10);
        let fs = t.fs.clone();
        t.ex.block_on(async move { fs.unmount(Ctx::on(0)).await.unwrap() })
            .unwrap();
        let r = fsck(t.ctrl.backend()).unwrap();
        assert!(r.is_spotless(), "{mode:?} unmounted:\n{}", show(&r));
        assert!(r.superblock.clean);
    }
}

#[test]
fn multi_group_fs_is_clean() {
    let t = new_fs(Mode::None, SsdProfile::optane_905p(), 80000, 1).unwrap();
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        fs.mkdir_path(c, "/a").await.unwrap();
        fs.create_path(c, "/a/f").await.unwrap();
        fs.write_path(c, "/a/f", 0, &[1u8; 3 * BLOCK]).await.unwrap();
        fs.unmount(c).await.unwrap();
    })
    .unwrap();
    let r = fsck(&**t.ctrl.backend()).unwrap();
    assert!(r.superblock.groups >= 2, "{:?}", r.superblock);
    assert!(r.is_spotless(), "{}", show(&r));
    assert_eq!((r.stats.files, r.stats.dirs, r.stats.used_blocks), (1, 2, 5));
}

#[test]
fn workload_images_are_clean_with_matching_stats() {
    for mode in modes() {
        let owned;
        let p = if mode == Mode::Classic {
            base()
        } else {
            owned = populate(mode);
            &owned
        };
        let r = &p.report;
        assert!(r.is_spotless(), "{mode:?}:\n{}", show(r));
        let s = &r.stats;
        let got = Tree {
            files: s.files,
            dirs: s.dirs,
            symlinks: s.symlinks,
            blocks: s.used_blocks,
            inodes: s.used_inodes,
        };
        assert_eq!(got, p.tree, "{mode:?}");
        // files: f1, r2, big, big2, sparse, 100 of the 150 long names.
        assert_eq!((s.files, s.dirs, s.symlinks), (105, 6, 2), "{mode:?}");
        assert_eq!(s.data_blocks, p.statfs.blocks, "{mode:?}");
        assert_eq!(s.free_blocks, p.statfs.free_blocks, "{mode:?}");
        assert_eq!(s.free_inodes, p.statfs.free_inodes, "{mode:?}");
        assert_eq!(s.inodes, p.statfs.inodes, "{mode:?}");
        // The same verdict from the copied image.
        let again = check(&p.image);
        assert_eq!(again.stats, r.stats, "{mode:?}");
        assert!(again.is_spotless());
        // The many-extent file really uses a tree block, and the truncated
        // one went back to inline extents.
        assert_eq!(inode(&p.image, p.inos["/d1/big2"]).tree.depth(), 1);
        assert_eq!(inode(&p.image, p.inos["/d1/big2"]).extents.len(), 12);
        assert_eq!(inode(&p.image, p.inos["/d1/big"]).tree.depth(), 0);
        assert!(inode(&p.image, p.inos["/d3"]).size > 2 * BLOCK as u64);
    }
}

#[test]
fn each_block_is_read_once_and_metadata_is_listed() {
    let p = base();
    let r = fsck_with(
        &p.image,
        &Options {
            collect_metadata: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(r.is_spotless());
    let of = |k: MetaKind| r.metadata.iter().filter(|m| m.kind == k).count();
    assert_eq!(of(MetaKind::Superblock), 1);
    assert_eq!(of(MetaKind::BlockBitmap), r.superblock.groups as usize);
    assert_eq!(of(MetaKind::InodeBitmap), r.superblock.groups as usize);
    assert_eq!(of(MetaKind::JournalSuper), r.superblock.journal_areas as usize);
    assert_eq!(of(MetaKind::ExtentNode), 1, "big2's leaf");
    assert!(of(MetaKind::Directory) >= 8);
    assert!(of(MetaKind::InodeTable) >= 7);
    // One long symlink block besides the metadata.
    assert_eq!(r.stats.blocks_read, r.metadata.len() as u64 + 1);
}

#[test]
fn fsck_is_fast() {
    let p = base();
    let n = std::env::var("FSCK_N").map_or(300, |v| v.parse().unwrap());
    let t0 = Instant::now();
    for _ in 0..n {
        assert!(fsck(&p.image).unwrap().is_clean());
    }
    let per = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let t = new_fs(Mode::None, SsdProfile::optane_905p(), BLOCKS, 1).unwrap();
    let t1 = Instant::now();
    for _ in 0..n {
        assert!(fsck(&**t.ctrl.backend()).unwrap().is_clean());
    }
    let fresh = t1.elapsed().as_secs_f64() * 1e6 / n as f64;
    eprintln!(
        "fsck: {per:.1} us per populated image ({} blocks read), {fresh:.1} us per fresh one through Backend::peek",
        p.report.stats.blocks_read
    );
    if !cfg!(debug_assertions) {
        assert!(per < 2000.0, "{per} us");
    }
}

// ---- deliberate damage ----

#[test]
fn clearing_the_bitmap_bit_of_a_used_block_is_an_error() {
    let p = base();
    let mut img = p.image.clone();
    let sb = superblock(&img);
    let blk = inode(&img, p.inos["/f1renamed"]).extents[0].physical;
    let g = sb.group_of(blk).unwrap();
    set_bit(&mut img, sb.block_bitmap(g), blk - sb.group_start(g), false);
    let r = check(&img);
    only_errors_of(&r, &[FindingKind::BlockUsedButFree]);
    let f = r.errors().next().unwrap();
    assert_eq!(f.block, Some(blk), "{}", show(&r));
    assert_eq!(r.findings.len(), 1, "{}", show(&r));
    // A metadata block (the inode table) marked free is an error too.
    let mut img = p.image.clone();
    set_bit(
        &mut img,
        sb.block_bitmap(0),
        sb.inode_table(0) - sb.group_start(0),
        false,
    );
    only_errors_of(&check(&img), &[FindingKind::BlockUsedButFree]);
}

#[test]
fn setting_the_bit_of_a_free_block_is_only_a_warning() {
    let p = base();
    let mut img = p.image.clone();
    let sb = superblock(&img);
    let last = sb.group_blocks(0) - 1;
    assert!(!bit(&img, sb.block_bitmap(0), last));
    set_bit(&mut img, sb.block_bitmap(0), last, true);
    let r = check(&img);
    assert!(r.is_clean(), "{}", show(&r));
    assert_eq!(r.findings.len(), 1, "{}", show(&r));
    assert_eq!(r.findings[0].kind, FindingKind::BlockMarkedButUnused);
    assert_eq!(r.findings[0].severity, Severity::Warning);
    assert_eq!(r.findings[0].block, Some(sb.group_start(0) + last));
    // Padding bits past the group's end cleared: a warning too.
    let mut img = p.image.clone();
    set_bit(&mut img, sb.block_bitmap(0), 32767, false);
    let r = check(&img);
    assert!(r.is_clean() && r.has(FindingKind::BitmapPadding), "{}", show(&r));
}

#[test]
fn lowering_a_link_count_is_an_error_raising_it_a_warning() {
    let p = base();
    let ino = p.inos["/f1renamed"];
    for (delta, kind) in [
        (-1i32, FindingKind::LinkCountTooLow),
        (1, FindingKind::LinkCountTooHigh),
    ] {
        let mut img = p.image.clone();
        let mut i = inode(&img, ino);
        assert_eq!(i.links, 2, "f1renamed and d1/f1link");
        i.links = (i.links as i32 + delta) as u16;
        put_inode(&mut img, ino, &i);
        let r = check(&img);
        assert_eq!(r.findings.len(), 1, "{}", show(&r));
        assert_eq!((r.findings[0].kind, r.findings[0].ino), (kind, Some(ino)));
        assert_eq!(r.is_clean(), delta > 0);
    }
    // A directory's count: it counts its subdirectories' "..".
    let mut img = p.image.clone();
    let d3 = p.inos["/d3"];
    let mut i = inode(&img, d3);
    assert_eq!(i.links, 3, "'.', its entry, and d2moved's '..'");
    i.links = 2;
    put_inode(&mut img, d3, &i);
    only_errors_of(&check(&img), &[FindingKind::LinkCountTooLow]);
}

#[test]
fn two_inodes_owning_one_block_is_an_error() {
    let p = base();
    let mut img = p.image.clone();
    let victim = inode(&img, p.inos["/f1renamed"]).extents[0].physical;
    let r2 = p.inos["/r2"];
    let mut i = inode(&img, r2);
    assert_eq!(i.extents.len(), 1);
    let old = i.extents[0].physical;
    i.extents[0].physical = victim;
    put_inode(&mut img, r2, &i);
    let r = check(&img);
    only_errors_of(&r, &[FindingKind::BlockOwnedTwice]);
    let f = r.errors().next().unwrap();
    assert_eq!(f.block, Some(victim));
    assert!(
        f.detail.contains(&p.inos["/f1renamed"].to_string()),
        "names the other owner: {f}"
    );
    // r2's old block is now leaked: a warning.
    assert!(r
        .warnings()
        .any(|w| w.kind == FindingKind::BlockMarkedButUnused && w.block == Some(old)));
    // One inode mapping a block twice.
    let mut img = p.image.clone();
    let big = p.inos["/d1/big"];
    let mut i = inode(&img, big);
    let first = i.extents[0].physical;
    i.extents[1].physical = first;
    put_inode(&mut img, big, &i);
    only_errors_of(&check(&img), &[FindingKind::BlockOwnedTwice]);
}

#[test]
fn an_entry_naming_a_free_inode_is_an_error() {
    let p = base();
    let mut img = p.image.clone();
    let sb = superblock(&img);
    let free = sb.inodes_per_group - 1;
    assert!(!bit(&img, sb.inode_bitmap(0), free as u64 - 1));
    let (b, mut entries) = dir_block_with(&img, ROOT_INO, "r2");
    entries.iter_mut().find(|e| e.name == b"r2").unwrap().ino = free;
    put_dir(&mut img, b, &entries);
    let r = check(&img);
    only_errors_of(&r, &[FindingKind::DirEntryBadInode]);
    assert_eq!(r.count(FindingKind::DirEntryBadInode), 1);
    // r2's inode is now an orphan: a warning.
    assert!(r
        .warnings()
        .any(|w| w.kind == FindingKind::InodeMarkedButUnreachable && w.ino == Some(p.inos["/r2"])));
    // Out of range and reserved numbers too.
    for bad in [sb.inodes() as u32 + 5, 5] {
        let mut img = p.image.clone();
        let mut e = entries.clone();
        e.iter_mut().find(|e| e.name == b"r2").unwrap().ino = bad;
        put_dir(&mut img, b, &e);
        only_errors_of(&check(&img), &[FindingKind::DirEntryBadInode]);
    }
}

#[test]
fn inode_bitmap_damage() {
    let p = base();
    let sb = superblock(&p.image);
    let f1 = p.inos["/f1renamed"];
    let mut img = p.image.clone();
    set_bit(&mut img, sb.inode_bitmap(0), f1 as u64 - 1, false);
    let r = check(&img);
    only_errors_of(&r, &[FindingKind::InodeUsedButFree]);
    assert_eq!(r.errors().next().unwrap().ino, Some(f1));
    let mut img = p.image.clone();
    let free = sb.inodes_per_group - 3;
    set_bit(&mut img, sb.inode_bitmap(0), free as u64 - 1, true);
    let r = check(&img);
    assert!(r.is_clean(), "{}", show(&r));
    assert_eq!(r.findings.len(), 1, "{}", show(&r));
    assert_eq!(
        (r.findings[0].kind, r.findings[0].ino),
        (FindingKind::InodeMarkedButUnreachable, Some(free))
    );
}

#[test]
fn directory_loops_and_hard_links_are_errors() {
    let p = base();
    let (d3, moved) = (p.inos["/d3"], p.inos["/d3/d2moved"]);
    let mut img = p.image.clone();
    let (b, mut e) = dir_block_with(&img, moved, "..");
    e.push(DirEntry {
        ino: d3,
        ftype: FileType::Dir,
        name: b"up".to_vec(),
    });
    put_dir(&mut img, b, &e);
    let r = check(&img);
    assert!(r.has(FindingKind::DirectoryLoop), "{}", show(&r));
    only_errors_of(&r, &[FindingKind::DirectoryLoop, FindingKind::LinkCountTooLow]);

    let mut img = p.image.clone();
    let (b, mut e) = dir_block_with(&img, ROOT_INO, "r2");
    e.push(DirEntry {
        ino: p.inos["/d1/victim"],
        ftype: FileType::Dir,
        name: b"alias".to_vec(),
    });
    put_dir(&mut img, b, &e);
    let r = check(&img);
    assert!(r.has(FindingKind::DirectoryHardLink), "{}", show(&r));
    only_errors_of(
        &r,
        &[FindingKind::DirectoryHardLink, FindingKind::LinkCountTooLow],
    );
}

#[test]
fn damaged_checksums_are_found() {
    let p = base();
    let sb = superblock(&p.image);
    let flip = |b: u64, at: usize, expect: FindingKind| {
        let mut img = p.image.clone();
        let mut blk = get(&img, b);
        blk[at] ^= 0x20;
        put(&mut img, b, &blk);
        let r = check(&img);
        assert!(r.has(expect) && !r.is_clean(), "{expect:?}:\n{}", show(&r));
        r
    };
    let big2 = p.inos["/d1/big2"];
    let (ib, off, _) = raw_inode(&p.image, big2);
    let r = flip(ib, off + 20, FindingKind::InodeChecksum);
    assert_eq!(r.errors().next().unwrap().ino, Some(big2));
    let leaf = *inode(&p.image, big2).tree.nodes().keys().next().unwrap();
    flip(leaf, 40, FindingKind::BadExtentTree);
    let d3 = inode(&p.image, p.inos["/d3"]);
    flip(
        d3.extents[0].physical + d3.extents[0].len as u64 - 1,
        9,
        FindingKind::DirBlockCorrupt,
    );
    flip(sb.area_start(0), 17, FindingKind::JournalSuperCorrupt);
    let root = inode(&p.image, ROOT_INO).extents[0].physical;
    flip(root, 100, FindingKind::DirBlockCorrupt);
}

#[test]
fn root_that_is_not_a_directory_is_an_error() {
    let p = base();
    let mut img = p.image.clone();
    let mut i = inode(&img, ROOT_INO);
    i.mode = FileType::File.mode_bits() | 0o644;
    put_inode(&mut img, ROOT_INO, &i);
    let r = check(&img);
    assert!(r.has(FindingKind::RootNotDir), "{}", show(&r));
    // Everything is unreachable: orphans, leaks, no crash.
    assert!(r.has(FindingKind::InodeMarkedButUnreachable));
    assert_eq!(r.stats.dirs, 0);
}

#[test]
fn structural_damage_behind_valid_checksums() {
    let p = base();
    let case = |what: &str, expect: FindingKind, damage: &dyn Fn(&mut Vec<u8>)| {
        let mut img = p.image.clone();
        damage(&mut img);
        let r = check(&img);
        assert!(r.has(expect), "{what}: {expect:?} expected:\n{}", show(&r));
        assert_eq!(
            r.is_clean(),
            expect.severity() == Severity::Warning,
            "{what}:\n{}",
            show(&r)
        );
    };
    let entry = |img: &mut Vec<u8>, dir: Ino, name: &str, f: &dyn Fn(&mut Vec<DirEntry>)| {
        let (b, mut e) = dir_block_with(img, dir, name);
        f(&mut e);
        put_dir(img, b, &e);
    };
    let with_inode = |img: &mut Vec<u8>, ino: Ino, f: &dyn Fn(&mut Loaded)| {
        let mut i = inode(img, ino);
        f(&mut i);
        put_inode(img, ino, &i);
    };
    let i = p.inos.clone();
    case("entry type", FindingKind::DirEntryBadType, &|img| {
        entry(img, ROOT_INO, "r2", &|e| {
            e.iter_mut().find(|x| x.name == b"r2").unwrap().ftype = FileType::Dir
        })
    });
    case("duplicate name", FindingKind::DirDuplicateName, &|img| {
        entry(img, ROOT_INO, "r2", &|e| {
            let x = e.iter().find(|x| x.name == b"r2").unwrap().clone();
            e.push(x)
        })
    });
    case("name with a slash", FindingKind::DirEntryBadName, &|img| {
        entry(img, ROOT_INO, "r2", &|e| {
            e.iter_mut().find(|x| x.name == b"r2").unwrap().name = b"r/2".to_vec()
        })
    });
    case("wrong dotdot", FindingKind::DirBadDotDot, &|img| {
        entry(img, i["/d3/d2moved"], "..", &|e| {
            e.iter_mut().find(|x| x.name == b"..").unwrap().ino = i["/d1"]
        })
    });
    case("no dot", FindingKind::DirMissingDot, &|img| {
        entry(img, i["/d1/victim"], ".", &|e| e.retain(|x| x.name != b"."))
    });
    case("directory size", FindingKind::DirSize, &|img| {
        with_inode(img, i["/d3"], &|x| x.size += 100)
    });
    case("directory hole", FindingKind::DirSize, &|img| {
        with_inode(img, i["/d1/victim"], &|x| x.size += BLOCK as u64)
    });
    case("extent in metadata", FindingKind::ExtentOutOfRange, &|img| {
        with_inode(img, i["/r2"], &|x| x.extents[0].physical = 3)
    });
    case("extent past the device", FindingKind::ExtentOutOfRange, &|img| {
        with_inode(img, i["/r2"], &|x| x.extents[0].physical = u64::MAX - 1)
    });
    case("overlapping extents", FindingKind::BadInode, &|img| {
        with_inode(img, i["/d1/big"], &|x| x.extents[1].logical = 0)
    });
    case("zero-length extent", FindingKind::BadInode, &|img| {
        with_inode(img, i["/d1/big"], &|x| x.extents[2].len = 0)
    });
    case("no file type", FindingKind::BadInode, &|img| {
        with_inode(img, i["/r2"], &|x| x.mode = 0o644)
    });
    case("inline flag on a file", FindingKind::BadInode, &|img| {
        with_inode(img, i["/r2"], &|x| x.flags |= mqfs::layout::FLAG_INLINE_SYMLINK)
    });
    case("size past the largest file", FindingKind::BadInode, &|img| {
        with_inode(img, i["/r2"], &|x| x.size = u64::MAX)
    });
    case("blocks past EOF", FindingKind::BlocksPastEof, &|img| {
        with_inode(img, i["/d1/big"], &|x| x.size = 10)
    });
    case("block count", FindingKind::BlockCountWrong, &|img| {
        with_inode(img, i["/d1/big"], &|x| x.nblocks += 7)
    });
    case("long symlink block lost", FindingKind::SymlinkBadTarget, &|img| {
        let b = inode(img, i["/d1/s2"]).extents[0].physical;
        put(img, b, &[0u8; BLOCK]);
    });
    case("inline symlink size", FindingKind::BadInode, &|img| {
        with_inode(img, i["/s1"], &|x| x.size = 0)
    });
    case("tree block out of range", FindingKind::ExtentOutOfRange, &|img| {
        // The root's index entry: child block at bytes 72..80.
        let (b, off, mut raw) = raw_inode(img, i["/d1/big2"]);
        raw[72..80].copy_from_slice(&2u64.to_le_bytes());
        let c = mqfs::layout::crc(&raw[..INODE_SIZE - 4]);
        raw[INODE_SIZE - 4..].copy_from_slice(&c.to_le_bytes());
        let mut blk = get(img, b);
        blk[off..off + INODE_SIZE].copy_from_slice(&raw);
        put(img, b, &blk);
    });
    // big2's root (depth 1): one index entry, key at 68, child at 72.
    let root = |img: &mut Vec<u8>, f: &dyn Fn(&mut [u8; INODE_SIZE])| {
        let (b, off, mut raw) = raw_inode(img, i["/d1/big2"]);
        f(&mut raw);
        let c = mqfs::layout::crc(&raw[..INODE_SIZE - 4]);
        raw[INODE_SIZE - 4..].copy_from_slice(&c.to_le_bytes());
        let mut blk = get(img, b);
        blk[off..off + INODE_SIZE].copy_from_slice(&raw);
        put(img, b, &blk);
    };
    case(
        "index key not the child's first",
        FindingKind::BadExtentTree,
        &|img| root(img, &|r| r[68..72].copy_from_slice(&1u32.to_le_bytes())),
    );
    case(
        "two index entries naming one block",
        FindingKind::BadExtentTree,
        &|img| {
            root(img, &|r| {
                let entry: [u8; 16] = r[68..84].try_into().unwrap();
                r[84..100].copy_from_slice(&entry);
                r[84..88].copy_from_slice(&100u32.to_le_bytes());
                r[56..58].copy_from_slice(&2u16.to_le_bytes());
            })
        },
    );
    case(
        "tree deeper than its blocks",
        FindingKind::BadExtentTree,
        &|img| root(img, &|r| r[58..60].copy_from_slice(&2u16.to_le_bytes())),
    );
    case("leaf extent shared", FindingKind::BlockOwnedTwice, &|img| {
        let victim = inode(img, i["/r2"]).extents[0].physical;
        with_inode(img, i["/d1/big2"], &|x| {
            x.extents[11] = Extent {
                logical: x.extents[11].logical,
                len: 1,
                physical: victim,
                unwritten: false,
            }
        })
    });
}

#[test]
fn superblock_damage_is_an_err_not_a_report() {
    let p = base();
    let mut img = p.image.clone();
    let mut b = get(&img, 0);
    b[..8].fill(0);
    put(&mut img, 0, &b);
    assert_eq!(fsck(&img).unwrap_err(), FsError::NotMqfs);
    let mut img = p.image.clone();
    let mut b = get(&img, 0);
    b[20] ^= 1;
    put(&mut img, 0, &b);
    assert!(matches!(fsck(&img), Err(FsError::Corrupt(_))));
    // A valid superblock claiming more blocks than the device has.
    let mut img = p.image.clone();
    let mut sb = superblock(&img);
    sb.blocks *= 2;
    sb.journal_start += BLOCKS;
    put(&mut img, 0, &sb.encode());
    assert!(matches!(fsck(&img), Err(FsError::Corrupt(_))));
    // No image at all.
    assert_eq!(fsck(&Vec::<u8>::new()).unwrap_err(), FsError::NotMqfs);
}

#[test]
fn findings_are_capped_and_counted() {
    let p = base();
    let mut img = p.image.clone();
    let sb = superblock(&img);
    // Every inode-table block of group 0 but the first: every checksum bad.
    for t in 1..sb.itable_blocks() {
        put(&mut img, sb.inode_table(0) + t, &[0x5a; BLOCK]);
    }
    let mut ib = get(&img, sb.inode_bitmap(0));
    ib[..(sb.inodes_per_group / 8) as usize].fill(0xff);
    put(&mut img, sb.inode_bitmap(0), &ib);
    let r = fsck_with(
        &img,
        &Options {
            max_findings: 50,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(r.findings.len(), 50);
    assert!(r.suppressed > 0 && r.suppressed_errors > 0);
    assert!(!r.is_clean());
}
