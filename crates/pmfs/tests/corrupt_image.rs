//! A corrupt image gives a typed error or a tree, never a panic: mount
//! (rollback, tree check) and the operations after it only return errors.

mod common;

use common::{profile, CTX, INODES, SIZE};
use fsapi::FileSystem as _;
use pcie_sim::{Executor, Machine, MachineProfile, PageStore, Pmem, TraceMode};
use pmfs::{Faults, Geometry, Pmfs, PmfsError, Tree};

/// Mounts `img`, takes the tree, then runs a few operations (whose
/// errors are fine); returns the tree or the mount's error.
fn mount(img: PageStore, faults: Faults) -> Result<Tree, PmfsError> {
    let ex = Executor::new(3);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Events);
    let pm = Pmem::attach_with_image(&m, profile(), img).unwrap();
    ex.block_on(async move {
        let fs = Pmfs::mount(&m, &pm, CTX, faults).await?;
        let t = fs.snapshot(CTX).await?;
        let _ = fs.create_path(CTX, "/new").await;
        let _ = fs.write_path(CTX, "/f2", 100, &[9; 5000]).await;
        let _ = fs.truncate_path(CTX, "/f3", 10).await;
        let _ = fs.rename_path(CTX, "/f4", "/d/h").await;
        let _ = fs.unlink_path(CTX, "/d/g").await;
        let _ = fs.rmdir_path(CTX, "/d").await;
        let _ = fs.read_path(CTX, "/f5").await;
        Ok(t)
    })
    .unwrap()
}

fn live_image() -> PageStore {
    fsapi::testing::live_image::<common::P>()
}

fn geo() -> Geometry {
    Geometry::for_size(SIZE, INODES).unwrap()
}

#[test]
fn memory_without_a_superblock_is_not_pmfs() {
    assert!(matches!(
        mount(PageStore::zeroed(SIZE), Faults::default()),
        Err(PmfsError::NotPmfs(_))
    ));
}

#[test]
fn the_live_image_mounts_to_its_tree() {
    let t = mount(live_image(), Faults::default()).unwrap();
    assert_eq!(t.len(), 6, "{:?}", t.keys());
}

/// Flips a byte every 7 bytes over the superblock, bitmap, journal,
/// inode table and the first directory blocks, one flip per mount.
#[test]
fn bit_flips_in_the_metadata_give_a_tree_or_a_typed_error() {
    let image = live_image();
    let g = geo();
    let end = g.data_at() + 2 * 4096;
    let (mut trees, mut errors) = (0, 0);
    for at in (0..end).step_by(7) {
        let mut img = image.clone();
        let mut b = [0u8; 1];
        img.read(at, &mut b);
        img.write(at, &[b[0] ^ 0x5a]);
        match mount(img, Faults::default()) {
            Ok(_) => trees += 1,
            Err(_) => errors += 1,
        }
    }
    eprintln!("{trees} flips mounted a tree, {errors} gave a typed error");
    assert!(errors > 0 && trees > 0);
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Garbage in the journal whose entries all look valid (magic, kind,
/// the newest generation, no commit): rollback refuses ranges outside
/// one line of the memory, and whatever it writes must not panic later.
#[test]
fn a_journal_of_plausible_garbage_gives_a_tree_or_a_typed_error() {
    let image = live_image();
    let g = geo();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..200 {
        let mut img = image.clone();
        let entries = 1 + round % 8;
        for e in 0..entries {
            let mut line = [0u8; 64];
            for w in line.chunks_mut(8) {
                w.copy_from_slice(&xorshift(&mut x).to_le_bytes());
            }
            // Aim half the entries at metadata so rollback writes it.
            if round % 2 == 0 {
                let target = (xorshift(&mut x) % (g.data_at() + 8192)) & !7;
                line[48..56].copy_from_slice(&target.to_le_bytes());
            }
            let n = 1 + xorshift(&mut x) % 6;
            let valid = 0xA5u64 << 56 | 1 << 48 | n << 40 | 0xffff_fff0;
            line[56..64].copy_from_slice(&valid.to_le_bytes());
            img.write(4096 + 64 * e, &line);
        }
        let _ = mount(img, Faults::default());
    }
}

#[test]
fn random_garbage_over_all_metadata_never_panics() {
    let image = live_image();
    let g = geo();
    let mut x = 0x1234_5678_9abc_def1u64;
    for _ in 0..100 {
        let mut img = image.clone();
        for _ in 0..16 {
            let at = xorshift(&mut x) % (g.data_at() + 8192);
            img.write(at, &[xorshift(&mut x) as u8]);
        }
        let _ = mount(img, Faults::default());
    }
}
