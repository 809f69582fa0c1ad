//! fsck's repair: an image damaged in each way fsck reports and a repair
//! can fix is repaired through the mounted file system, after which fsck
//! finds nothing and every file that survived reads as before; damage the
//! repair cannot fix stays reported and harms nothing else.

mod surgery;
use surgery::{get, put, set_bit, superblock};

use std::collections::BTreeMap;
use std::rc::Rc;

use ccnvme::BlockDevice;
use mqfs::fsck::{fsck, BlockSource, FindingKind, Report};
use mqfs::layout::{
    decode_dir_block, encode_dir_block, encode_orphans, DirEntry, Inode, BLOCK, INODE_SIZE, ORPHAN_INO,
};
use mqfs::testing::{machine_over, new_fs};
use mqfs::{mount, probe_options, Ctx, FsProfile, Ino, Mode};
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::TraceMode;

const BLOCKS: u64 = 8192;

/// The modes: none, classic and horae, and mq once it mounts.
fn modes() -> Vec<Mode> {
    let mut v = vec![Mode::None, Mode::Classic, Mode::Horae];
    if new_fs(Mode::Mq, SsdProfile::optane_905p(), 4096, 2).is_ok() {
        v.push(Mode::Mq);
    }
    v
}

/// The files the image holds, with their contents.
fn files() -> Vec<(&'static str, Vec<u8>)> {
    let pat = |seed: u8, n: usize| {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
            .collect::<Vec<u8>>()
    };
    vec![
        ("/a", pat(3, 20000)),
        ("/d/b", pat(5, 7000)),
        ("/d/e/c", pat(7, 9000)),
        ("/d/e/f/g", pat(11, 100)),
        ("/big", pat(13, 300_000)),
    ]
}

/// A populated, cleanly unmounted image: its bytes, the inode numbers of
/// its names, and the inode of `/o`, a file unlinked while open (listed
/// in the orphan table).
struct Populated {
    mode: Mode,
    image: Vec<u8>,
    inos: BTreeMap<&'static str, Ino>,
    orphan: Ino,
    /// fsck of the image without the orphan: what a repair must get back to.
    clean: Report,
    /// That image.
    clean_image: Vec<u8>,
}

fn image_of(ctrl: &nvme_ctrl::Controller) -> Vec<u8> {
    let backend = ctrl.backend();
    let mut image = vec![0u8; BLOCKS as usize * BLOCK];
    let mut buf = [0u8; BLOCK];
    for b in 0..BLOCKS {
        backend.peek(b, &mut buf);
        image[b as usize * BLOCK..(b as usize + 1) * BLOCK].copy_from_slice(&buf);
    }
    image
}

fn populate(mode: Mode) -> Populated {
    let t = new_fs(mode, SsdProfile::optane_905p(), BLOCKS, 2).unwrap();
    let fs = t.fs.clone();
    let (inos, orphan) =
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            for d in ["/d", "/d/e", "/d/e/f"] {
                fs.mkdir_path(c, d).await.unwrap();
            }
            for (p, data) in files() {
                fs.create_path(c, p).await.unwrap();
                fs.write_path(c, p, 0, &data).await.unwrap();
            }
            let a = fs.resolve(c, "/a").await.unwrap();
            let d = fs.resolve(c, "/d").await.unwrap();
            fs.link(c, a, d, "h").await.unwrap();
            fs.create_path(c, "/o").await.unwrap();
            fs.write_path(c, "/o", 0, &[9u8; 50000]).await.unwrap();
            let o = fs.resolve(c, "/o").await.unwrap();
            fs.open(c, o).await.unwrap();
            fs.unlink_path(c, "/o").await.unwrap();
            let mut inos = BTreeMap::new();
            for p in ["/a", "/d", "/d/b", "/d/e", "/d/e/c", "/d/e/f", "/big"] {
                inos.insert(p, fs.resolve(c, p).await.unwrap());
            }
            fs.unmount(c).await.unwrap();
            (inos, o)
        })
        .unwrap();
    let image = image_of(&t.ctrl);
    let with_orphan = fsck(&image).unwrap();
    assert!(with_orphan.findings.is_empty(), "{with_orphan}");
    // The same image once mount has freed the orphan.
    let (ex, m, ctrl) = machine_over(SsdProfile::optane_905p(), media(&image), 2, TraceMode::Off, 1);
    ex.block_on(async move {
        let c = Ctx::on(0);
        let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
        let fs = mount(&dev, c, FsProfile::default()).await.unwrap();
        fs.unmount(c).await.unwrap();
    })
    .unwrap();
    let clean_image = image_of(&ctrl);
    let clean = fsck(&clean_image).unwrap();
    assert!(clean.findings.is_empty(), "{clean}");
    Populated {
        mode,
        image,
        inos,
        orphan,
        clean,
        clean_image,
    }
}

fn media(image: &[u8]) -> Media {
    let mut m = Media::memory(BLOCKS);
    let mut buf = [0u8; BLOCK];
    for b in 0..BLOCKS {
        image.read(b, &mut buf);
        if buf.iter().any(|x| *x != 0) {
            m.write(b, &std::sync::Arc::new(buf));
        }
    }
    m
}

/// What a repair left: the fix lines, the check of the unmounted image,
/// and what the listed paths read.
struct After {
    fixed: Vec<String>,
    report: Report,
    read: BTreeMap<String, Result<Vec<u8>, String>>,
}

/// Mounts `image` on a fresh machine, repairs it, reads `paths`, unmounts
/// and checks the result.
fn repair(mode: Mode, image: &[u8], paths: Vec<String>) -> After {
    let (ex, m, ctrl) = machine_over(SsdProfile::optane_905p(), media(image), 2, TraceMode::Off, 1);
    let base: Rc<dyn BlockSource> = ctrl.backend().clone();
    let (fixed, read) = ex
        .block_on(async move {
            let c = Ctx::on(0);
            let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
            let fs = mount(&dev, c, FsProfile::default()).await.unwrap();
            let done = fs.repair(c, base).await.unwrap();
            let mut read = BTreeMap::new();
            for p in paths {
                let r = fs.read_path(c, &p).await.map_err(|e| e.to_string());
                read.insert(p, r);
            }
            fs.unmount(c).await.unwrap();
            (done.fixed, read)
        })
        .unwrap();
    let report = fsck(&image_of(&ctrl)).unwrap();
    After { fixed, report, read }
}

// ---- image surgery ----

/// Applies `f` to inode `ino` (checksum recomputed).
fn edit_inode(img: &mut [u8], ino: Ino, f: impl FnOnce(&mut Inode)) {
    let (b, off) = superblock(img).inode_location(ino).unwrap();
    let mut blk = get(img, b);
    let mut i = Inode::decode(&blk[off..off + INODE_SIZE]).unwrap();
    f(&mut i);
    blk[off..off + INODE_SIZE].copy_from_slice(&i.encode());
    put(img, b, &blk);
}

fn clear_orphan_table(img: &mut [u8]) {
    let (b, off) = superblock(img).inode_location(ORPHAN_INO).unwrap();
    let mut blk = get(img, b);
    blk[off..off + INODE_SIZE].copy_from_slice(&encode_orphans(&[]));
    put(img, b, &blk);
}

/// Removes the entry `name` from directory `dir` (its first block holding
/// it).
fn remove_entry(img: &mut [u8], dir: Ino, name: &str) {
    let (b, off) = superblock(img).inode_location(dir).unwrap();
    let i = Inode::decode(&get(img, b)[off..off + INODE_SIZE]).unwrap();
    for e in i.tree.extents() {
        for k in 0..e.len as u64 {
            let p = e.physical + k;
            let mut ents: Vec<DirEntry> = decode_dir_block(&get(img, p)[..]).unwrap();
            let before = ents.len();
            ents.retain(|x| x.name != name.as_bytes());
            if ents.len() != before {
                put(img, p, &encode_dir_block(&ents).unwrap());
                return;
            }
        }
    }
    panic!("no entry {name} in {dir}");
}

/// A block `ino` maps (its first extent's first block).
fn first_block(img: &[u8], ino: Ino) -> u64 {
    let (b, off) = superblock(img).inode_location(ino).unwrap();
    let i = Inode::decode(&get(img, b)[off..off + INODE_SIZE]).unwrap();
    i.tree.extents()[0].physical
}

fn all_paths() -> Vec<String> {
    files().into_iter().map(|(p, _)| p.to_string()).collect()
}

/// Every surviving file reads as written (at its own path, or where
/// `moved` says it went).
fn contents_intact(after: &After, moved: &BTreeMap<&str, String>) {
    for (p, data) in files() {
        let at = moved.get(p).cloned().unwrap_or_else(|| p.to_string());
        let got = after.read.get(&at).unwrap_or_else(|| panic!("{at} not read"));
        assert_eq!(got.as_ref().map(|d| d.len()), Ok(data.len()), "{at}");
        assert!(got.as_ref().is_ok_and(|d| *d == data), "{at}: contents differ");
    }
}

fn spotless(after: &After, what: &str) {
    assert!(
        after.report.findings.is_empty(),
        "{what}: after repair\n{}\nfixed:\n{}",
        after.report,
        after.fixed.join("\n")
    );
}

// ---- the damage ----

#[test]
fn an_unlisted_orphan_is_freed_and_its_space_comes_back() {
    for mode in modes() {
        let p = populate(mode);
        let mut img = p.image.clone();
        clear_orphan_table(&mut img);
        let before = fsck(&img).unwrap();
        assert!(
            before
                .findings
                .iter()
                .any(|f| f.kind == FindingKind::InodeMarkedButUnreachable && f.ino == Some(p.orphan)),
            "{mode:?}: {before}"
        );
        let after = repair(mode, &img, all_paths());
        spotless(&after, "orphan");
        assert!(
            after
                .fixed
                .iter()
                .any(|l| l.contains(&format!("inode {}", p.orphan))),
            "{:?}",
            after.fixed
        );
        // Pass 4 freed the inode, pass 5 its blocks.
        assert_eq!(
            after.report.stats.free_blocks, p.clean.stats.free_blocks,
            "{mode:?}"
        );
        assert_eq!(
            after.report.stats.free_inodes, p.clean.stats.free_inodes,
            "{mode:?}"
        );
        contents_intact(&after, &BTreeMap::new());
    }
}

#[test]
fn wrong_link_counts_are_set_to_the_entries() {
    let p = populate(Mode::Classic);
    let mut img = p.image.clone();
    // /a has two names: one link is an error, five a warning; /d too low.
    edit_inode(&mut img, p.inos["/a"], |i| i.links = 1);
    edit_inode(&mut img, p.inos["/d/b"], |i| i.links = 5);
    edit_inode(&mut img, p.inos["/d"], |i| i.links = 2);
    let before = fsck(&img).unwrap();
    assert!(before.has(FindingKind::LinkCountTooLow) && before.has(FindingKind::LinkCountTooHigh));
    let after = repair(p.mode, &img, all_paths());
    spotless(&after, "links");
    assert_eq!(
        after.fixed.iter().filter(|l| l.contains("link count")).count(),
        3,
        "{:?}",
        after.fixed
    );
    contents_intact(&after, &BTreeMap::new());
}

#[test]
fn bitmaps_are_rebuilt_from_what_the_inodes_own() {
    let p = populate(Mode::Classic);
    let mut img = p.image.clone();
    let sb = superblock(&img);
    // A used block marked free (error), a free one marked used (leak), a
    // used inode marked free (error), a free one marked used (leak).
    let used = first_block(&img, p.inos["/big"]);
    set_bit(&mut img, sb.block_bitmap(0), used - sb.group_start(0), false);
    set_bit(&mut img, sb.block_bitmap(0), sb.group_blocks(0) - 3, true);
    let ino = p.inos["/d/b"];
    set_bit(&mut img, sb.inode_bitmap(0), (ino - 1) as u64, false);
    set_bit(&mut img, sb.inode_bitmap(0), sb.inodes_per_group as u64 - 2, true);
    let before = fsck(&img).unwrap();
    for k in [
        FindingKind::BlockUsedButFree,
        FindingKind::BlockMarkedButUnused,
        FindingKind::InodeUsedButFree,
        FindingKind::InodeMarkedButUnreachable,
    ] {
        assert!(before.has(k), "{k:?} not found: {before}");
    }
    let after = repair(p.mode, &img, all_paths());
    spotless(&after, "bitmaps");
    assert_eq!(after.report.stats.free_blocks, p.clean.stats.free_blocks);
    assert_eq!(after.report.stats.free_inodes, p.clean.stats.free_inodes);
    contents_intact(&after, &BTreeMap::new());
}

#[test]
fn unreachable_inodes_with_links_go_to_lost_and_found() {
    for mode in modes() {
        let p = populate(mode);
        let mut img = p.image.clone();
        // /d/e (a subtree) and /d/b lose their entries.
        remove_entry(&mut img, p.inos["/d"], "e");
        remove_entry(&mut img, p.inos["/d"], "b");
        let before = fsck(&img).unwrap();
        assert!(before.has(FindingKind::InodeMarkedButUnreachable), "{before}");
        let (e, b) = (p.inos["/d/e"], p.inos["/d/b"]);
        let moved: BTreeMap<&str, String> = [
            ("/d/b", format!("/lost+found/#{b}")),
            ("/d/e/c", format!("/lost+found/#{e}/c")),
            ("/d/e/f/g", format!("/lost+found/#{e}/f/g")),
        ]
        .into_iter()
        .collect();
        let mut paths: Vec<String> = moved.values().cloned().collect();
        paths.extend(["/a".to_string(), "/big".to_string()]);
        let after = repair(mode, &img, paths);
        spotless(&after, "lost+found");
        assert!(
            after.fixed.iter().any(|l| l.contains("lost+found made")),
            "{:?}",
            after.fixed
        );
        contents_intact(&after, &moved);
        // Exactly the tops were linked: f came with e.
        assert_eq!(
            after.fixed.iter().filter(|l| l.contains("linked as")).count(),
            2,
            "{:?}",
            after.fixed
        );
    }
}

#[test]
fn every_kind_at_once_in_every_mode() {
    for mode in modes() {
        let p = populate(mode);
        let mut img = p.image.clone();
        let sb = superblock(&img);
        clear_orphan_table(&mut img);
        remove_entry(&mut img, p.inos["/d"], "e");
        edit_inode(&mut img, p.inos["/a"], |i| i.links = 7);
        let used = first_block(&img, p.inos["/big"]);
        set_bit(&mut img, sb.block_bitmap(0), used - sb.group_start(0), false);
        set_bit(&mut img, sb.block_bitmap(0), sb.group_blocks(0) - 5, true);
        let e = p.inos["/d/e"];
        let moved: BTreeMap<&str, String> = [
            ("/d/e/c", format!("/lost+found/#{e}/c")),
            ("/d/e/f/g", format!("/lost+found/#{e}/f/g")),
        ]
        .into_iter()
        .collect();
        let mut paths: Vec<String> = moved.values().cloned().collect();
        paths.extend(["/a", "/d/b", "/big"].map(String::from));
        let after = repair(mode, &img, paths);
        spotless(&after, &format!("{mode:?}"));
        contents_intact(&after, &moved);
    }
}

#[test]
fn a_clean_file_system_plans_nothing_and_is_left_alone() {
    let p = populate(Mode::Classic);
    // The orphan table lists /o: a repair mounts, and the mount frees it.
    let (_, plan) = mqfs::fsck::plan_repair(&p.image).unwrap();
    assert!(plan.orphans_listed && !plan.is_empty());
    let (_, plan) = mqfs::fsck::plan_repair(&p.clean_image).unwrap();
    assert!(plan.is_empty(), "{plan:?}");
    let after = repair(Mode::Classic, &p.clean_image, all_paths());
    assert!(after.fixed.is_empty(), "{:?}", after.fixed);
    spotless(&after, "clean");
}

#[test]
fn a_block_owned_twice_is_reported_not_fixed_and_harms_nothing() {
    let p = populate(Mode::Classic);
    let mut img = p.image.clone();
    // /d/b's first extent points into /big's blocks.
    let target = first_block(&img, p.inos["/big"]);
    edit_inode(&mut img, p.inos["/d/b"], |i| {
        let mut ext = i.tree.extents();
        ext[0].physical = target;
        i.tree.overwrite_extents(&ext);
    });
    let after = repair(p.mode, &img, all_paths());
    assert!(after.report.has(FindingKind::BlockOwnedTwice), "{}", after.report);
    // Nothing else is wrong, and /big is intact.
    for f in after.report.errors() {
        assert_eq!(f.kind, FindingKind::BlockOwnedTwice, "{}", after.report);
    }
    let big = files().into_iter().find(|(p, _)| *p == "/big").unwrap().1;
    assert_eq!(after.read["/big"].as_ref().ok(), Some(&big));
}
