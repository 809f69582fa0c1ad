//! The complete oracle's new checks, end to end: promises the builder
//! makes, checked by `oracle::check` on a mounted file system whose state
//! is broken by hand the way a faulty recovery could leave it. Each test
//! also shows the promise the old oracle made (bytes only, or nothing
//! before an fsync) passing on the same broken state.

use crashfuzz::oracle::{check, Expect, Node, Promise, States};
use crashfuzz::promises::{file_durable, tree_durable};
use crashfuzz::{ModeName, PromiseBuilder};
use mqfs::testing::new_fs;
use mqfs::{Ctx, Mode};
use nvme_ctrl::SsdProfile;

fn file(content: &[u8], nlink: u16) -> Option<Node> {
    Some(Node::File {
        content: Some(std::sync::Arc::new(crashfuzz::content::Content::from(content))),
        nlink: Some(nlink),
        perm: Some(0o644),
        xattrs: None,
    })
}

fn promise(expect: Expect, op: &str) -> Promise {
    Promise {
        expect,
        from: 0,
        until: usize::MAX,
        op: op.into(),
    }
}

#[test]
fn durable_meta_catches_a_synced_link_count_lost_where_bytes_pass() {
    let t = new_fs(Mode::Classic, SsdProfile::optane_905p(), 8192, 1).unwrap();
    let fs = t.fs.clone();
    let c = Ctx::on(0);
    t.ex.block_on(async move {
        fs.create_path(c, "/a").await.unwrap();
        fs.write_path(c, "/a", 0, b"x").await.unwrap();
        fs.link_path(c, "/a", "/b").await.unwrap();
        fs.fsync_path(c, "/a").await.unwrap();
        // What `fsync /a` promises now: its bytes, link count 2, mode.
        let synced = promise(Expect::States(file_durable("/a", file(b"x", 2))), "fsync /a");
        // The old oracle's promise for the same fsync: the bytes.
        let bytes_only = promise(
            Expect::File {
                path: "/a".into(),
                content: b"x".to_vec(),
                if_present: false,
            },
            "fsync /a",
        );
        assert_eq!(
            check(&fs, c, &synced).await.unwrap(),
            None,
            "the intact state passes"
        );
        // Broken: the second name and its link count gone, as a recovery
        // that dropped the link's half of the transaction would leave it.
        fs.unlink_path(c, "/b").await.unwrap();
        let f = check(&fs, c, &synced).await.unwrap().expect("caught");
        assert_eq!(f.check, "durable-meta", "{f:?}");
        assert!(f.detail.contains("link count 1"), "{}", f.detail);
        assert_eq!(
            check(&fs, c, &bytes_only).await.unwrap(),
            None,
            "bytes alone miss it"
        );
    })
    .unwrap();
}

#[test]
fn op_atomic_catches_a_rename_that_lost_the_file_where_each_name_passes() {
    let t = new_fs(Mode::Classic, SsdProfile::optane_905p(), 8192, 1).unwrap();
    let fs = t.fs.clone();
    let c = Ctx::on(0);
    // The builder's promises: the setup's tree (/a durable), then
    // `rename /a /c` starting after 10 trace entries, before any fsync.
    let mut b = PromiseBuilder::new(ModeName::Classic);
    b.base(tree_durable(
        vec![("/".into(), Some(Node::DIR)), ("/a".into(), file(b"x", 1))],
        None,
    ));
    let effects = [("/a".to_string(), None), ("/c".to_string(), file(b"x", 1))];
    let id = b.begin_op(vec!["/a".into(), "/c".into()], 10, &effects);
    assert!(b.atomic_op(
        id,
        &["/a".into(), "/c".into()],
        &[None, file(b"x", 1)],
        "rename /a /c".into()
    ));
    b.end(id, 20, true);
    let in_force: Vec<Promise> = b.promises().iter().filter(|p| p.covers(15)).cloned().collect();
    assert!(
        in_force.iter().any(|p| matches!(p.expect, Expect::OneOf { .. })),
        "{in_force:?}"
    );
    t.ex.block_on(async move {
        fs.create_path(c, "/a").await.unwrap();
        fs.write_path(c, "/a", 0, b"x").await.unwrap();
        fs.sync(c).await.unwrap();
        for p in &in_force {
            assert_eq!(
                check(&fs, c, p).await.unwrap(),
                None,
                "before the rename: {}",
                p.op
            );
        }
        fs.rename_path(c, "/a", "/c").await.unwrap();
        for p in &in_force {
            assert_eq!(
                check(&fs, c, p).await.unwrap(),
                None,
                "after the rename: {}",
                p.op
            );
        }
        // Broken: under neither name. Each name alone is in a state the
        // rename allows (/a gone, /c not yet made), so the widened tree
        // promise passes; only the all-or-nothing promise sees it.
        fs.unlink_path(c, "/c").await.unwrap();
        let mut caught = Vec::new();
        for p in &in_force {
            if let Some(f) = check(&fs, c, p).await.unwrap() {
                caught.push(f);
            }
        }
        assert_eq!(caught.len(), 1, "{caught:?}");
        assert_eq!(caught[0].check, "op-atomic");
        assert!(caught[0].detail.contains("half done"), "{}", caught[0].detail);
        assert!(in_force
            .iter()
            .any(|p| matches!(&p.expect, Expect::States(States { paths, .. }) if paths.contains_key("/c"))));
    })
    .unwrap();
}

#[test]
fn ordered_binds_the_barriers_state_only_where_its_marker_exists() {
    let t = new_fs(Mode::Horae, SsdProfile::optane_905p(), 8192, 1).unwrap();
    let fs = t.fs.clone();
    let c = Ctx::on(0);
    t.ex.block_on(async move {
        fs.create_path(c, "/a").await.unwrap();
        fs.write_path(c, "/a", 0, b"x").await.unwrap();
        // What `fbarrier /a` ordered: /a holding "x"; the marker /d is a
        // name made after it.
        let ordered = promise(
            Expect::Ordered {
                marker: "/d".into(),
                then: file_durable("/a", file(b"x", 1)),
            },
            "fbarrier /a",
        );
        assert_eq!(
            check(&fs, c, &ordered).await.unwrap(),
            None,
            "no marker, /a right"
        );
        // Broken as a recovery that kept a later transaction over a lost
        // barrier would leave it: /a has lost its bytes, /d exists.
        fs.write_path(c, "/a", 0, b"y").await.unwrap();
        assert_eq!(
            check(&fs, c, &ordered).await.unwrap(),
            None,
            "without the marker the barrier promises nothing"
        );
        fs.create_path(c, "/d").await.unwrap();
        let f = check(&fs, c, &ordered).await.unwrap().expect("caught");
        assert_eq!(f.check, "ordered");
        assert!(
            f.detail.contains("/a") && f.detail.contains("/d exists"),
            "{}",
            f.detail
        );
        assert!(crashfuzz::oracle::is_promise_check(&f.check));
        // The barrier's state with the marker: kept.
        fs.write_path(c, "/a", 0, b"x").await.unwrap();
        assert_eq!(
            check(&fs, c, &ordered).await.unwrap(),
            None,
            "marker and /a right"
        );
    })
    .unwrap();
}
