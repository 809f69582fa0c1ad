//! `mqfs fsck --repair`: an image with nothing to repair is not changed
//! by one byte; a damaged one (a file's entry gone, a leaked block, a
//! wrong link count) is repaired, checks clean, and mounts with the
//! surviving files intact (the lost one in /lost+found).

mod common;

use std::path::Path;

use common::{fsck_ok, image_bytes, mkfs, mqfs, ok, output, require, Mount, TempDir};
use mqfs::layout::{decode_dir_block, encode_dir_block, Inode, Superblock, BLOCK, INODE_SIZE, ROOT_INO};
use mqfs::BlockSource;

fn superblock(img: &[u8]) -> Superblock {
    let mut b = [0u8; BLOCK];
    img.read(0, &mut b);
    Superblock::decode(&b, img.blocks()).unwrap()
}

fn inode(img: &[u8], ino: u32) -> (usize, Inode) {
    let (b, off) = superblock(img).inode_location(ino).unwrap();
    let at = b as usize * BLOCK + off;
    (at, Inode::decode(&img[at..at + INODE_SIZE]).unwrap())
}

/// Removes `name` from the root directory; returns its inode.
fn remove_from_root(img: &mut [u8], name: &str) -> u32 {
    let (_, root) = inode(img, ROOT_INO);
    for e in root.tree.extents() {
        for k in 0..e.len as usize {
            let at = (e.physical as usize + k) * BLOCK;
            let mut ents = decode_dir_block(&img[at..at + BLOCK]).unwrap();
            if let Some(i) = ents.iter().position(|x| x.name == name.as_bytes()) {
                let gone = ents.remove(i);
                img[at..at + BLOCK].copy_from_slice(&encode_dir_block(&ents).unwrap()[..]);
                return gone.ino;
            }
        }
    }
    panic!("no {name} in the root");
}

fn repair(img: &Path) -> (Option<i32>, String) {
    let o = output(mqfs().arg("fsck").arg("--repair").arg(img));
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
}

#[test]
fn repair_of_a_clean_image_changes_nothing() {
    let t = TempDir::new("repair-clean");
    for mode in ["none", "classic", "horae", "mq"] {
        let img = mkfs(&t, &format!("{mode}.img"), &["--size", "32M", "--mode", mode]);
        let before = image_bytes(&img);
        let (code, out) = repair(&img);
        assert_eq!(code, Some(0), "{mode}: {out}");
        assert!(out.contains("nothing to repair"), "{out}");
        assert!(
            image_bytes(&img) == before,
            "{mode}: repair changed a clean image"
        );
    }
}

#[test]
fn a_damaged_image_is_repaired_and_its_files_survive() {
    require("fusermount3");
    let t = TempDir::new("repair-damaged");
    let mnt = t.dir("mnt");
    for mode in ["classic", "mq"] {
        let img = mkfs(&t, &format!("{mode}.img"), &["--size", "32M", "--mode", mode]);
        let keep: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let lost: Vec<u8> = (0..30_000u32).map(|i| (i % 13) as u8).collect();
        {
            let m = Mount::start(&img, &mnt, &[]);
            std::fs::write(m.join("keep"), &keep).unwrap();
            std::fs::write(m.join("lost"), &lost).unwrap();
            std::fs::hard_link(m.join("keep"), m.join("keep2")).unwrap();
            m.unmount();
        }
        let mut media = std::fs::read(&img).unwrap();
        let ino = remove_from_root(&mut media, "lost");
        // keep has two names; say one.
        let keep_ino = {
            let (_, root) = inode(&media, ROOT_INO);
            let e = root.tree.extents()[0];
            let at = e.physical as usize * BLOCK;
            decode_dir_block(&media[at..at + BLOCK])
                .unwrap()
                .into_iter()
                .find(|x| x.name == b"keep")
                .unwrap()
                .ino
        };
        let (at, mut k) = inode(&media, keep_ino);
        k.links = 1;
        media[at..at + INODE_SIZE].copy_from_slice(&k.encode());
        std::fs::write(&img, &media).unwrap();

        let o = output(mqfs().arg("fsck").arg(&img));
        assert_eq!(o.status.code(), Some(1), "{mode}: damage not found");
        let (code, out) = repair(&img);
        assert_eq!(code, Some(0), "{mode}: {out}");
        assert!(out.contains(&format!("linked as /lost+found/#{ino}")), "{out}");
        assert!(out.contains("link count 1 set to 2"), "{out}");
        let report = fsck_ok(&img);
        assert!(report.contains(" 0 errors, 0 warnings"), "{report}");
        // A second repair has nothing to do.
        let before = image_bytes(&img);
        let (code, out) = repair(&img);
        assert_eq!(code, Some(0), "{out}");
        assert!(image_bytes(&img) == before);
        let m = Mount::start(&img, &mnt, &[]);
        assert_eq!(std::fs::read(m.join("keep")).unwrap(), keep);
        assert_eq!(std::fs::read(m.join("keep2")).unwrap(), keep);
        assert_eq!(
            std::fs::read(m.join(&format!("lost+found/#{ino}"))).unwrap(),
            lost
        );
        m.unmount();
        ok(mqfs().arg("fsck").arg(&img));
    }
}
