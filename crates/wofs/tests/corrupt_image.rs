//! A corrupt image gives a typed error or is repaired by the scan (torn
//! packages dropped), never a panic.

mod common;

use common::{profile, Env, CTX, SIZE, SLOTS};
use fsapi::FileSystem as _;
use pcie_sim::{Executor, Machine, MachineProfile, PageStore, Pmem, TraceMode};
use wofs::package::{AttrBody, Body, Dentry, Package};
use wofs::{Faults, FileType, Geometry, Tree, Wofs, WofsError, ROOT};

fn mount(img: PageStore, faults: Faults) -> Result<Tree, WofsError> {
    let ex = Executor::new(3);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Events);
    let pm = Pmem::attach_with_image(&m, profile(), img).unwrap();
    ex.block_on(async move { Wofs::mount(&m, &pm, CTX, faults).await?.snapshot(CTX).await })
        .unwrap()
}

fn formatted() -> (PageStore, Geometry) {
    let img = Env::formatted(5).medium.persistent_image();
    (img, Geometry::for_size(SIZE, SLOTS).unwrap())
}

fn put(img: &mut PageStore, geo: &Geometry, slot: u32, seq: u64, body: Body) {
    let bytes = Package { seq, body }.encode().unwrap();
    img.write(geo.slot_addr(slot).0, &bytes);
}

fn file(ino: u64, parent: u64, name: &str) -> Body {
    Body::Create(Dentry {
        ino,
        parent,
        ftype: FileType::File,
        perm: 0o644,
        name: name.into(),
    })
}

#[test]
fn memory_without_a_superblock_is_not_wofs() {
    assert!(matches!(
        mount(PageStore::zeroed(SIZE), Faults::default()),
        Err(WofsError::NotWofs(_))
    ));
}

#[test]
fn garbage_in_every_slot_is_dropped_by_the_checksum() {
    let (mut img, geo) = formatted();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for slot in 0..SLOTS {
        let mut b = [0u8; 256];
        for w in b.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        // A plausible header: the magic and version, so parsing goes on.
        b[..4].copy_from_slice(b"WOFP");
        b[5] = 1;
        img.write(geo.slot_addr(slot).0, &b);
    }
    assert_eq!(mount(img.clone(), Faults::default()).unwrap(), Tree::new());
    // Without the checksum the same garbage must still not panic.
    let _ = mount(
        img,
        Faults {
            skip_crc_check: true,
            ..Faults::default()
        },
    );
}

#[test]
fn bit_flips_in_a_live_image_give_a_tree_or_a_typed_error() {
    let image = fsapi::testing::live_image::<common::W>();
    let geo = Geometry::for_size(SIZE, SLOTS).unwrap();
    for faults in [
        Faults::default(),
        Faults {
            skip_crc_check: true,
            ..Faults::default()
        },
    ] {
        for at in (geo.slot_addr(0).0..geo.slot_addr(16).0).step_by(13) {
            let mut img = image.clone();
            let mut b = [0u8; 1];
            img.read(at, &mut b);
            img.write(at, &[b[0] ^ 0x5a]);
            match mount(img, faults) {
                Ok(_) | Err(WofsError::Corrupt { .. }) => {}
                Err(e) => panic!("unexpected error {e}"),
            }
        }
    }
}

#[test]
fn contradicting_valid_packages_are_a_typed_error() {
    let (base, geo) = formatted();
    let corrupt = |img: PageStore| matches!(mount(img, Faults::default()), Err(WofsError::Corrupt { .. }));

    let mut img = base.clone();
    put(&mut img, &geo, 0, 1, file(2, ROOT, "a"));
    put(&mut img, &geo, 1, 2, file(3, ROOT, "a"));
    assert!(corrupt(img), "two live entries with one name");

    let mut img = base.clone();
    put(&mut img, &geo, 0, 1, file(2, 77, "a"));
    assert!(corrupt(img), "an entry in a directory that does not exist");

    let mut img = base.clone();
    put(&mut img, &geo, 0, 5, file(2, ROOT, "a"));
    put(&mut img, &geo, 1, 5, file(3, ROOT, "b"));
    assert!(corrupt(img), "two packages with one sequence number");

    let mut img = base.clone();
    put(&mut img, &geo, 0, 1, file(2, ROOT, "a"));
    let attr = AttrBody {
        ino: 2,
        size: 4096,
        perm: 0o644,
        pages: vec![geo.pages + 1],
    };
    put(&mut img, &geo, 1, 2, Body::Attr(attr));
    assert!(corrupt(img), "a data page out of range");

    let mut img = base;
    put(&mut img, &geo, 0, 1, file(2, ROOT, "a"));
    let mut ok = mount(img, Faults::default()).unwrap();
    assert_eq!(
        ok.pop_first().map(|(p, n)| (p, n.links)),
        Some(("/a".to_string(), 1))
    );
}

/// Random packages, each valid on its own (checksummed), that reference
/// each other arbitrarily: mount gives a tree or `Corrupt`, and a mounted
/// tree takes further operations without a panic.
#[test]
fn random_valid_packages_mount_or_give_corrupt_and_never_panic() {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use wofs::package::PkgRef;

    let (base, geo) = formatted();
    let (mut mounted, mut refused) = (0, 0);
    for seed in 0..300u64 {
        let mut r = ChaCha8Rng::seed_from_u64(seed);
        let mut img = base.clone();
        let n = r.gen_range(1..12);
        for seq in 1..=n {
            let ino = r.gen_range(2..6);
            let parent = if r.gen_bool(0.6) { ROOT } else { r.gen_range(2..6) };
            let d = Dentry {
                ino,
                parent,
                ftype: if r.gen_bool(0.3) {
                    FileType::Dir
                } else {
                    FileType::File
                },
                perm: 0o644,
                name: ["a", "b", "c"][r.gen_range(0..3)].into(),
            };
            let cancel = PkgRef {
                slot: r.gen_range(0..8),
                seq: r.gen_range(1..=n),
            };
            let body = match r.gen_range(0..5) {
                0 => Body::Create(d),
                1 => Body::Link(d),
                2 => Body::Unlink { ino, cancels: cancel },
                3 => Body::Rename {
                    dentry: d,
                    cancels: vec![cancel],
                },
                _ => {
                    let pages: Vec<u32> = (0..r.gen_range(0..4))
                        .map(|_| r.gen_range(0..=geo.pages + 1))
                        .collect();
                    Body::Attr(AttrBody {
                        ino,
                        size: pages.len() as u64 * 4096,
                        perm: 0o600,
                        pages,
                    })
                }
            };
            put(&mut img, &geo, r.gen_range(0..8), seq, body);
        }
        let ex = Executor::new(seed);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Events);
        let pm = Pmem::attach_with_image(&m, profile(), img).unwrap();
        let got = ex
            .block_on(async move {
                let fs = Wofs::mount(&m, &pm, CTX, Faults::default()).await?;
                fs.snapshot(CTX).await?;
                // The rebuilt PTL and free lists take more work.
                for name in ["a", "b", "x"] {
                    let _ = fs.create(CTX, ROOT, name, 0o644).await;
                    let _ = fs.write_path(CTX, &format!("/{name}"), 0, b"data").await;
                    let _ = fs.rename_path(CTX, &format!("/{name}"), "/y").await;
                    let _ = fs.unlink(CTX, ROOT, "y").await;
                }
                fs.snapshot(CTX).await
            })
            .unwrap();
        match got {
            Ok(_) => mounted += 1,
            Err(WofsError::Corrupt { .. }) => refused += 1,
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    assert!(
        mounted > 30 && refused > 30,
        "both outcomes seen: {mounted} mounted, {refused} refused"
    );
}
