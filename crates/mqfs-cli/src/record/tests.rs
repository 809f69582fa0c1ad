//! The recorder on its own: promises, their ends, overlap, fatomic
//! histories.

use std::sync::Arc;

use crashfuzz::{Expect, Promise};
use mqfs::layout::ROOT_INO;
use mqfs::{FileType, Mode};
use nvme_ctrl::{Image, SsdProfile};
use pcie_sim::{BusLayout, PageStore};

use super::*;

fn recorder(mode: Mode) -> Recorder {
    let profile = SsdProfile::by_name("flash-vwc").expect("a built-in profile");
    let config = SavedConfig::new("t", ModeName::of_fs_mode(mode), profile, 2);
    let run = SavedRun::new(
        config,
        BusLayout::default(),
        PageStore::zeroed(4096),
        Arc::new(Image::zeroed(16)),
    );
    Recorder::new(run, Path::new("unused.cfz"), mode)
}

fn at(entries: usize) -> At {
    At {
        entries,
        time: SimTime(entries as u64 * 1000),
    }
}

/// Runs `req` from `start` to `end` entries, successfully.
fn op(r: &mut Recorder, req: Req, start: usize, end: usize) {
    let b = r.begin(req, 0, at(start)).expect("an operation");
    r.end(b, at(end), None);
}

fn promises(r: &Recorder) -> &[Promise] {
    r.promises()
}

#[test]
fn fsync_promises_content_until_a_write_through_any_name() {
    let mut r = recorder(Mode::Classic);
    op(&mut r, Req::Make(Make::File, ROOT_INO, "a".into()), 0, 10);
    r.learned(ROOT_INO, "a", 7, FileType::File, false);
    op(&mut r, Req::Make(Make::Link(7), ROOT_INO, "b".into()), 10, 20);
    r.learned(ROOT_INO, "b", 7, FileType::File, false);
    op(&mut r, Req::Sync(7, SyncKind::Fsync), 20, 30);
    assert_eq!(r.wanted(), Some(Wanted::File(7)));
    r.promise(Read::File(b"hello".to_vec()));
    op(&mut r, Req::Sync(7, SyncKind::Fdatasync), 30, 40);
    r.promise(Read::File(b"hello".to_vec()));
    let p = promises(&r);
    assert_eq!(p.len(), 2);
    assert_eq!(
        p[0].expect,
        Expect::File {
            path: "/b".into(),
            content: b"hello".to_vec(),
            if_present: false
        }
    );
    assert_eq!((p[0].from, p[0].op.as_str()), (30, "fsync /b"));
    assert!(matches!(p[1].expect, Expect::File { if_present: true, .. }));
    // A write through /b changes /a's file too, and the other way round.
    op(&mut r, Req::Write(7, 0, 5), 50, 60);
    assert!(promises(&r).iter().all(|p| p.until == 51), "{:?}", promises(&r));
    let ops: Vec<&str> = r.run().recording.ops.iter().map(|o| o.op.as_str()).collect();
    assert_eq!(
        ops,
        [
            "create /a",
            "link /a /b",
            "fsync /b",
            "fdatasync /b",
            "write /b 0 5"
        ]
    );
}

#[test]
fn fsync_of_a_directory_promises_its_entries_until_a_change_inside() {
    let mut r = recorder(Mode::Mq);
    op(&mut r, Req::Make(Make::Dir, ROOT_INO, "d".into()), 0, 5);
    r.learned(ROOT_INO, "d", 9, FileType::Dir, false);
    op(&mut r, Req::Sync(9, SyncKind::Fsync), 5, 8);
    assert_eq!(r.wanted(), Some(Wanted::Dir(9)));
    r.promise(Read::Dir(BTreeMap::new()));
    // A setattr of the mode changes no content or name.
    op(&mut r, Req::Setattr(9, None), 8, 9);
    assert_eq!(promises(&r)[0].until, usize::MAX);
    op(&mut r, Req::Make(Make::File, 9, "f".into()), 10, 12);
    assert_eq!(promises(&r)[0].until, 11);
    assert!(matches!(&promises(&r)[0].expect, Expect::Dir { path, .. } if path == "/d"));
}

#[test]
fn no_promise_when_a_change_overlapped_or_the_sync_failed() {
    let mut r = recorder(Mode::Classic);
    r.learned(ROOT_INO, "a", 7, FileType::File, true);
    let w = r.begin(Req::Write(7, 0, 1), 1, at(0)).expect("a change");
    let s = r.begin(Req::Sync(7, SyncKind::Fsync), 0, at(2)).expect("a sync");
    r.end(w, at(4), None);
    r.end(s, at(6), None);
    assert_eq!(r.wanted(), None);
    let s = r.begin(Req::Sync(7, SyncKind::Fsync), 0, at(7)).expect("a sync");
    r.end(s, at(8), Some("I/O error".into()));
    assert_eq!(r.wanted(), None);
    assert_eq!(r.run().recording.refused.len(), 1);
    assert!(r.begin(Req::Query, 0, at(9)).is_none());
}

#[test]
fn fatomic_in_mq_mode_promises_known_versions_only() {
    let mut r = recorder(Mode::Mq);
    r.learned(ROOT_INO, "old", 5, FileType::File, true);
    op(&mut r, Req::Sync(5, SyncKind::Fatomic), 0, 4);
    r.promise(Read::File(b"x".to_vec()));
    assert!(promises(&r).is_empty(), "the content at the mount is unknown");
    op(&mut r, Req::Make(Make::File, ROOT_INO, "new".into()), 4, 6);
    r.learned(ROOT_INO, "new", 6, FileType::File, false);
    op(&mut r, Req::Sync(6, SyncKind::Fsync), 6, 8);
    r.promise(Read::File(b"v1".to_vec()));
    op(&mut r, Req::Write(6, 0, 2), 8, 9);
    op(&mut r, Req::Sync(6, SyncKind::Fatomic), 10, 14);
    r.promise(Read::File(b"v2".to_vec()));
    let p = promises(&r);
    assert_eq!(p.len(), 2);
    assert_eq!(
        p[1].expect,
        Expect::Atomic {
            path: "/new".into(),
            versions: vec![b"v1".to_vec(), Vec::new(), b"v2".to_vec()]
        }
    );
    assert_eq!(p[1].from, 10, "atomic from the call's start");
    assert!(r.unnoted().is_empty(), "the synced file is noted");
    // Elsewhere fatomic is fsync.
    let mut r = recorder(Mode::Horae);
    r.learned(ROOT_INO, "old", 5, FileType::File, true);
    op(&mut r, Req::Sync(5, SyncKind::Fatomic), 0, 4);
    r.promise(Read::File(b"x".to_vec()));
    assert!(matches!(
        promises(&r)[0].expect,
        Expect::File {
            if_present: false,
            ..
        }
    ));
    assert_eq!(promises(&r)[0].from, 4);
}

#[test]
fn renames_and_removals_end_promises_and_move_names() {
    let mut r = recorder(Mode::Classic);
    r.learned(ROOT_INO, "d", 3, FileType::Dir, true);
    r.learned(3, "f", 4, FileType::File, true);
    op(&mut r, Req::Sync(4, SyncKind::Fsync), 0, 2);
    r.promise(Read::File(b"f".to_vec()));
    op(
        &mut r,
        Req::Rename(ROOT_INO, "d".into(), ROOT_INO, "e".into()),
        3,
        5,
    );
    assert_eq!(promises(&r)[0].until, 4);
    op(&mut r, Req::Sync(4, SyncKind::Fsync), 5, 7);
    r.promise(Read::File(b"f".to_vec()));
    assert!(matches!(&promises(&r)[1].expect, Expect::File { path, .. } if path == "/e/f"));
    op(&mut r, Req::Unlink(3, "f".into()), 8, 9);
    assert_eq!(promises(&r)[1].until, 9);
    op(&mut r, Req::Sync(4, SyncKind::Fsync), 9, 10);
    assert_eq!(r.wanted(), None, "an inode with no name left");
}

#[test]
fn a_sync_of_another_file_notes_the_written_files_as_versions() {
    let mut r = recorder(Mode::Mq);
    for (name, ino) in [("a", 6), ("b", 7)] {
        op(&mut r, Req::Make(Make::File, ROOT_INO, name.into()), 0, 1);
        r.learned(ROOT_INO, name, ino, FileType::File, false);
    }
    op(&mut r, Req::Write(6, 0, 1), 1, 2);
    op(&mut r, Req::Write(7, 0, 1), 2, 3);
    assert!(r.unnoted().is_empty(), "only after a sync");
    op(&mut r, Req::Sync(7, SyncKind::Fsync), 3, 4);
    r.promise(Read::File(b"B".to_vec()));
    assert_eq!(r.unnoted(), [6]);
    r.note(6, b"A");
    op(&mut r, Req::Write(6, 1, 1), 5, 6);
    op(&mut r, Req::Sync(6, SyncKind::Fatomic), 6, 7);
    r.promise(Read::File(b"AA".to_vec()));
    assert_eq!(
        promises(&r)[1].expect,
        Expect::Atomic {
            path: "/a".into(),
            versions: vec![b"A".to_vec(), Vec::new(), b"AA".to_vec()]
        }
    );
    // Classic mode keeps no versions.
    let mut r = recorder(Mode::Classic);
    op(&mut r, Req::Make(Make::File, ROOT_INO, "a".into()), 0, 1);
    r.learned(ROOT_INO, "a", 6, FileType::File, false);
    op(&mut r, Req::Write(6, 0, 1), 1, 2);
    op(&mut r, Req::Sync(6, SyncKind::Fsync), 3, 4);
    assert!(r.unnoted().is_empty());
}
