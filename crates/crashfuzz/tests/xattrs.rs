//! Extended attributes in crashfuzz: the workload language's `setxattr`
//! and `removexattr` (parsed, refused as Linux refuses them), the
//! promises made about them (fsync, sync and a directory's fsync promise
//! them; fdatasync does not) and the oracle's check of a recovered image
//! against them, shown to fail on a broken state that the check without
//! attributes passes; and the `xattrs` built-in workload explored.

mod common;

use std::collections::BTreeMap;

use common::{config, opts, workload, SAFE_MODES};
use crashfuzz::model::Model;
use crashfuzz::oracle::{check, Node, States};
use crashfuzz::promises::{dir_durable, file_durable};
use crashfuzz::record::{run_op, Fault, Fds};
use crashfuzz::workload::{pattern, xattr_value, XattrHow};
use crashfuzz::{explore, parse, record, Durable, Expect, ModeName, Op, Promise, PromiseBuilder};
use mqfs::testing::new_fs;
use mqfs::{Ctx, Mode, SyncKind, XattrFlags};
use nvme_ctrl::SsdProfile;

fn s(p: &str) -> String {
    p.to_string()
}

#[test]
fn setxattr_and_removexattr_parse_and_print_back() {
    let w = parse(
        "x",
        "setup create /f\nsetxattr /f user.k 100 6\nsetxattr /f user.k 100\n\
         setxattr /f user.k 9 2 replace\nsetxattr / trusted.t 0 create\nremovexattr /f user.k\n",
    )
    .expect("parse");
    assert_eq!(
        w.threads[0],
        vec![
            Op::Setxattr(s("/f"), s("user.k"), 100, 6, XattrHow::Any),
            Op::Setxattr(s("/f"), s("user.k"), 100, 1, XattrHow::Any),
            Op::Setxattr(s("/f"), s("user.k"), 9, 2, XattrHow::Replace),
            Op::Setxattr(s("/"), s("trusted.t"), 0, 1, XattrHow::Create),
            Op::Removexattr(s("/f"), s("user.k")),
        ]
    );
    assert_eq!(w.lines[0], vec![2, 3, 4, 5, 6]);
    assert_eq!(parse("x", &w.to_text()).expect("round trip"), w);
    assert_eq!(w.threads[0][2].to_string(), "setxattr /f user.k 9 2 replace");
    assert_eq!(w.threads[0][2].changed_paths(), vec!["/f"]);
    assert!(!w.threads[0][4].is_sync());
    // The value is the write pattern from position 0.
    assert_eq!(
        xattr_value(3, 6),
        vec![pattern(6, 0), pattern(6, 1), pattern(6, 2)]
    );
}

#[test]
fn a_malformed_attribute_line_names_its_line_and_the_problem() {
    for (bad, what) in [
        ("setxattr /f", "missing attribute name"),
        ("setxattr /f user.k", "missing value length"),
        ("setxattr /f user.k ten", "value length is not a number"),
        ("setxattr /f user.k 10 300", "seed is not a byte"),
        ("setxattr /f user.k 10 2 maybe", "`create` or `replace`"),
        ("setxattr /f user.k 10 always", "`create` or `replace`"),
        ("setxattr /f user.k 2000000", "limited to 1 MiB"),
        ("setxattr /f user.k 1 2 create extra", "unexpected \"extra\""),
        ("setxattr f user.k 1", "not an absolute path"),
        ("removexattr /f", "missing attribute name"),
        ("removexattr /f user.k more", "unexpected \"more\""),
        ("removexattr", "missing path"),
    ] {
        let e = parse("x", &format!("sync\n# two\n{bad}\n")).expect_err(bad);
        assert_eq!(e.line, 3, "{bad}: {e}");
        assert!(e.what.contains(what), "{bad}: {}", e.what);
    }
}

#[test]
fn a_refused_attribute_operation_is_kept_with_its_line_and_changes_nothing() {
    let w = parse(
        "f",
        "setup create /a\nsetxattr /a user.k 5 1\nsetxattr /a user.k 5 2 create\n\
         removexattr /a user.none\nsetxattr /a user.new 5 3 replace\nsetxattr /a bogus.k 1\nsync\n",
    )
    .expect("parse");
    let rec = record(&w, &config(ModeName::Mq, "optane-905p")).expect("record");
    let refused: Vec<(&str, &str)> = rec
        .refused
        .iter()
        .map(|(op, e)| (op.as_str(), e.split(':').next().unwrap_or("")))
        .collect();
    assert_eq!(
        refused,
        vec![
            ("setxattr /a user.k 5 2 create (line 3)", "EEXIST"),
            ("removexattr /a user.none (line 4)", "ENODATA"),
            ("setxattr /a user.new 5 3 replace (line 5)", "ENODATA"),
            ("setxattr /a bogus.k 1 1 (line 6)", "EOPNOTSUPP"),
        ]
    );
    // The sync promises the one attribute that was set, with its first
    // value: the refused calls left nothing in the model.
    let sync = rec
        .promises
        .iter()
        .find(|p| p.op == "sync")
        .expect("sync promise");
    let Expect::States(st) = &sync.expect else {
        panic!("{sync:?}")
    };
    let want: BTreeMap<String, Vec<u8>> = [(s("user.k"), xattr_value(5, 1))].into();
    assert_eq!(st.paths["/a"].len(), 1);
    assert_eq!(
        st.paths["/a"][0].as_ref().and_then(Node::xattrs).map(|x| &**x),
        Some(&want)
    );
}

#[test]
fn the_model_keeps_attributes_with_the_inode() {
    let mut m = Model::default();
    let set = |p: &str, n: &str, seed| Op::Setxattr(s(p), s(n), 4, seed, XattrHow::Any);
    let names = |m: &Model, p: &str| -> Option<Vec<String>> {
        m.state(p)
            .and_then(|n| n.xattrs().cloned())
            .map(|x| x.keys().cloned().collect())
    };
    m.apply(&Op::Create(s("/f")));
    m.apply(&set("/f", "user.a", 1));
    m.apply(&Op::Link(s("/f"), s("/g")));
    m.apply(&set("/g", "user.b", 2));
    assert_eq!(names(&m, "/f"), Some(vec![s("user.a"), s("user.b")]));
    m.apply(&Op::Rename(s("/f"), s("/h")));
    assert_eq!(names(&m, "/h"), Some(vec![s("user.a"), s("user.b")]));
    m.apply(&Op::Removexattr(s("/h"), s("user.a")));
    assert_eq!(names(&m, "/g"), Some(vec![s("user.b")]));
    // The last name gone, a new file there has none.
    m.apply(&Op::Unlink(s("/g")));
    m.apply(&Op::Unlink(s("/h")));
    m.apply(&Op::Create(s("/h")));
    assert_eq!(names(&m, "/h"), Some(vec![]));
    // A directory's too; setxattr(2)'s refusals leave the set as it was.
    m.apply(&Op::Mkdir(s("/d")));
    m.apply(&set("/d", "user.d", 3));
    let before = m.state("/d");
    for refused in [
        Op::Setxattr(s("/d"), s("user.d"), 4, 9, XattrHow::Create),
        Op::Setxattr(s("/d"), s("user.e"), 4, 9, XattrHow::Replace),
        Op::Setxattr(s("/d"), s("user.big"), 5000, 9, XattrHow::Any),
        Op::Setxattr(s("/d"), s("user.huge"), 70_000, 9, XattrHow::Any),
    ] {
        m.apply(&refused);
        assert_eq!(m.state("/d"), before, "{refused}");
    }
    assert_eq!(names(&m, "/d"), Some(vec![s("user.d")]));
}

/// The promise a sync of `kind` on `path` makes, as the recorder has the
/// builder make it.
fn synced(b: &mut PromiseBuilder, kind: SyncKind, path: &str, st: States, at: usize) -> Promise {
    let id = b.begin_op(Vec::new(), at, &[]);
    b.end(id, at + 1, true);
    let op = format!("{kind:?} {path}");
    assert!(b.synced(id, kind, path, Durable::States(st), true, op.clone()));
    b.promises()
        .iter()
        .rev()
        .find(|p| p.op == op)
        .cloned()
        .expect("promised")
}

/// `p` without its attributes: what the oracle checked before it knew
/// them.
fn without_xattrs(p: &Promise) -> Promise {
    let Expect::States(st) = &p.expect else {
        panic!("{p:?}")
    };
    let mut st = st.clone();
    for allowed in st.paths.values_mut() {
        for n in allowed.iter_mut().flatten() {
            match n {
                Node::File { xattrs, .. } | Node::Dir { xattrs } => *xattrs = None,
                Node::Symlink(_) => {}
            }
        }
    }
    Promise {
        expect: Expect::States(st),
        ..p.clone()
    }
}

#[test]
fn a_synced_attribute_lost_torn_or_added_is_caught_where_the_check_without_attributes_passes() {
    let t = new_fs(Mode::Classic, SsdProfile::optane_905p(), 8192, 1).expect("fs");
    let (fs, c) = (t.fs.clone(), Ctx::on(0));
    let ops = vec![
        Op::Create(s("/a")),
        Op::Write(s("/a"), 0, 10, 1),
        Op::Setxattr(s("/a"), s("user.k"), 100, 2, XattrHow::Any),
        Op::Mkdir(s("/d")),
        Op::Setxattr(s("/d"), s("user.dir"), 30, 3, XattrHow::Any),
    ];
    let mut m = Model::default();
    for op in &ops {
        m.apply(op);
    }
    let mut b = PromiseBuilder::new(ModeName::Classic);
    let fsync_a = synced(
        &mut b,
        SyncKind::Fsync,
        "/a",
        file_durable("/a", m.state("/a")),
        0,
    );
    let fdatasync_a = synced(
        &mut b,
        SyncKind::Fdatasync,
        "/a",
        file_durable("/a", m.state("/a")),
        2,
    );
    let fsync_d = synced(
        &mut b,
        SyncKind::Fsync,
        "/d",
        dir_durable("/d", m.state("/d"), Vec::new()),
        4,
    );
    // fdatasync promises the bytes, not the attributes (fdatasync(2)).
    let Expect::States(st) = &fdatasync_a.expect else {
        panic!()
    };
    assert!(matches!(
        &st.paths["/a"][0],
        Some(Node::File {
            content: Some(_),
            xattrs: None,
            ..
        })
    ));
    // A later replace, not synced: from its start the old value or the new.
    let replace = Op::Setxattr(s("/a"), s("user.k"), 100, 4, XattrHow::Replace);
    let next = m.after(&replace);
    let id = b.begin_op(vec![s("/a")], 10, &next.states(&m.affected(&replace)));
    b.end(id, 12, true);
    let widened: Vec<Promise> = b
        .promises()
        .iter()
        .filter(|p| p.covers(11) && p.op == "Fsync /a")
        .cloned()
        .collect();
    assert_eq!(widened.len(), 1, "{:?}", b.promises());
    let Expect::States(st) = &widened[0].expect else {
        panic!()
    };
    assert_eq!(st.paths["/a"].len(), 2, "old or new: {st:?}");
    t.ex.block_on(async move {
        let fds = Fds::default();
        for op in &ops {
            run_op(&fs, c, op, &fds).await.expect("op");
        }
        let ino = fs.resolve(c, "/a").await.expect("/a");
        let dir = fs.resolve(c, "/d").await.expect("/d");
        let all = [&fsync_a, &fdatasync_a, &fsync_d];
        for p in all {
            assert_eq!(check(&fs, c, p).await.expect("check"), None, "intact: {}", p.op);
        }
        // Broken as a recovery that dropped the attribute block's half of
        // a transaction would leave it: lost, torn (a value of the same
        // length with other bytes), or one attribute too many.
        let torn = xattr_value(100, 9);
        let broken: [(&str, Vec<u8>); 3] = [("lost", Vec::new()), ("torn", torn), ("added", b"x".to_vec())];
        for (how, value) in broken {
            match how {
                "lost" => fs.removexattr(c, ino, "user.k").await.expect("remove"),
                "torn" => fs
                    .setxattr(c, ino, "user.k", &value, XattrFlags::Any)
                    .await
                    .expect("set"),
                _ => fs
                    .setxattr(c, ino, "user.x", &value, XattrFlags::Create)
                    .await
                    .expect("add"),
            }
            let f = check(&fs, c, &fsync_a).await.expect("check").expect(how);
            assert_eq!(f.check, "durable-meta", "{how}: {f:?}");
            assert!(f.detail.contains("extended attributes"), "{how}: {}", f.detail);
            assert_eq!(
                check(&fs, c, &without_xattrs(&fsync_a)).await.expect("check"),
                None,
                "{how}"
            );
            assert_eq!(check(&fs, c, &fdatasync_a).await.expect("check"), None, "{how}");
            for p in &widened {
                assert!(
                    check(&fs, c, p).await.expect("check").is_some(),
                    "{how}: {}",
                    p.op
                );
            }
            // Back to the synced set.
            let _ = fs.removexattr(c, ino, "user.x").await;
            let v = xattr_value(100, 2);
            fs.setxattr(c, ino, "user.k", &v, XattrFlags::Any)
                .await
                .expect("restore");
            assert_eq!(check(&fs, c, &fsync_a).await.expect("check"), None, "restored");
        }
        // The later replace: its new value passes the widened promises, and
        // fails the fsync's own (which no longer covers that point).
        let v = xattr_value(100, 4);
        fs.setxattr(c, ino, "user.k", &v, XattrFlags::Replace)
            .await
            .expect("replace");
        for p in &widened {
            assert_eq!(
                check(&fs, c, p).await.expect("check"),
                None,
                "new value: {}",
                p.op
            );
        }
        assert!(check(&fs, c, &fsync_a).await.expect("check").is_some());
        // A directory's attributes, promised by its fsync.
        fs.removexattr(c, dir, "user.dir").await.expect("remove");
        let f = check(&fs, c, &fsync_d).await.expect("check").expect("dir caught");
        assert_eq!(f.check, "durable-meta", "{f:?}");
        assert_eq!(
            check(&fs, c, &without_xattrs(&fsync_d)).await.expect("check"),
            None
        );
    })
    .expect("run");
}

#[test]
fn fsync_promises_the_attributes_as_set_and_fdatasync_does_not() {
    let rec = record(&workload("xattrs"), &config(ModeName::Classic, "optane-905p")).expect("record");
    let errnos: Vec<&str> = rec
        .refused
        .iter()
        .map(|(_, e)| e.split(':').next().unwrap_or(""))
        .collect();
    assert_eq!(errnos, vec!["EEXIST", "ENODATA", "ENOSPC"], "{:?}", rec.refused);
    let own = |op: &str| -> Vec<Option<Node>> {
        let p = rec.promises.iter().find(|p| p.op == op).expect(op);
        let Expect::States(st) = &p.expect else {
            panic!("{p:?}")
        };
        let path = op.split(' ').nth(1).expect("path");
        st.paths[path].clone()
    };
    let names = |n: &Option<Node>| -> Option<Vec<(String, usize)>> {
        n.as_ref()
            .and_then(Node::xattrs)
            .map(|x| x.iter().map(|(k, v)| (k.clone(), v.len())).collect())
    };
    // The first fsync: the setup's attribute and the new one.
    assert_eq!(
        own("fsync /f").iter().map(names).collect::<Vec<_>>(),
        vec![Some(vec![(s("user.a"), 100), (s("user.old"), 20)])]
    );
    // fdatasync: none.
    assert!(own("fdatasync /f").iter().all(|n| names(n).is_none()));
    // The directory's fsync: its attribute.
    assert_eq!(names(&own("fsync /d")[0]), Some(vec![(s("user.dir"), 30)]));
    // Through the hard link: the large value and the link's own.
    assert_eq!(
        names(&own("fsync /d/g")[0]),
        Some(vec![
            (s("user.a"), 50),
            (s("user.b"), 10),
            (s("user.big"), 3500),
            (s("user.c"), 5)
        ])
    );
}

#[test]
fn the_xattrs_workload_passes_in_every_safe_mode_and_ext4_nj_is_caught() {
    let w = workload("xattrs");
    for profile in ["optane-905p", "flash-vwc"] {
        for mode in SAFE_MODES {
            let r = explore(&w, &config(mode, profile), &opts(), &w.name).expect("explore");
            assert!(r.states_checked > 20, "{mode:?} {profile}: {r:?}");
            assert!(r.violations.is_empty(), "{mode:?} {profile}: {:?}", r.violations);
        }
        // Ext4-NJ's fsync writes the attribute block, then the inode
        // (Linux's sync_mapping_buffers before ext4_write_inode), and
        // leaves the block bitmap to writeback: a crash after the fsync
        // leaves the new attribute block owned but free in the bitmap.
        let r = explore(&w, &config(ModeName::None, profile), &opts(), &w.name).expect("explore");
        assert!(
            r.violations
                .iter()
                .any(|v| v.detail.contains("free in the bitmap")),
            "{profile}: {:?}",
            r.violations
        );
    }
}

#[test]
fn a_commit_record_without_fua_loses_synced_attributes_and_the_oracle_says_so() {
    // JBD2's commit block without FUA on a drive with a volatile cache:
    // an fsync may return with its transaction not durable. The structure
    // stays consistent (the journal is replayed or not), so only the
    // promises see it: the attribute sets fsync made durable are lost.
    let w = workload("xattrs");
    let mut cfg = config(ModeName::Classic, "flash-vwc");
    cfg.fault = Some(Fault::NoCommitFua);
    let r = explore(&w, &cfg, &opts(), &w.name).expect("explore");
    let attrs: Vec<_> = r
        .violations
        .iter()
        .filter(|v| v.check == "durable-meta" && v.detail.contains("extended attributes"))
        .collect();
    assert!(!attrs.is_empty(), "{:?}", r.violations);
}

/// An operation of the differential test below: attribute changes over a
/// few names, values around the block's capacity, and the operations that
/// move or share an inode.
fn xattr_op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    let path = prop::sample::select(vec!["/a", "/b", "/d"]);
    let name = prop::sample::select(vec!["user.x", "user.y", "trusted.z", "bogus.w"]);
    let len = prop::sample::select(vec![0u64, 7, 1500, 3000, 70_000]);
    let how = prop::sample::select(vec![XattrHow::Any, XattrHow::Create, XattrHow::Replace]);
    prop_oneof![
        4 => (path.clone(), name.clone(), len, any::<u8>(), how)
            .prop_map(|(p, n, l, seed, h)| Op::Setxattr(s(p), s(n), l, seed, h)),
        2 => (path.clone(), name).prop_map(|(p, n)| Op::Removexattr(s(p), s(n))),
        1 => path.clone().prop_map(|p| Op::Create(s(p))),
        1 => Just(Op::Link(s("/a"), s("/b"))),
        1 => Just(Op::Rename(s("/a"), s("/b"))),
        1 => Just(Op::Rename(s("/b"), s("/a"))),
        1 => prop::sample::select(vec!["/a", "/b"]).prop_map(|p| Op::Unlink(s(p))),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 48,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x7a77),
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// The model against MQFS, as the recorder uses it: each operation
    /// applied to the model only if MQFS accepted it. Where MQFS refuses a
    /// setxattr for its flags or size (EEXIST, ENODATA, ENOSPC, E2BIG),
    /// the model's foreseen outcome (`Model::after`, to which promises
    /// widen before the answer) must change nothing; after every
    /// operation each name's attributes read back (listxattr, getxattr)
    /// are the model's.
    #[test]
    fn the_model_foresees_mqfs_attribute_outcomes(ops in proptest::collection::vec(xattr_op(), 1..40)) {
        let t = new_fs(Mode::Mq, SsdProfile::optane_905p(), 8192, 1).expect("fs");
        let (fs, c) = (t.fs.clone(), Ctx::on(0));
        let out: Result<(), String> = t.ex.block_on(async move {
            let fds = Fds::default();
            let mut m = Model::default();
            m.apply(&Op::Create(s("/a")));
            m.apply(&Op::Mkdir(s("/d")));
            for op in [Op::Create(s("/a")), Op::Mkdir(s("/d"))] {
                run_op(&fs, c, &op, &fds).await.map_err(|e| e.to_string())?;
            }
            for op in &ops {
                let foreseen = m.after(op);
                match run_op(&fs, c, op, &fds).await {
                    Ok(_) => m.apply(op),
                    Err(e) => {
                        // The refusals the model knows (Model::xattrs_after_set);
                        // a name MQFS refuses is foreseen as set, which only widens.
                        let known = ["EEXIST", "ENODATA", "ENOSPC", "E2BIG"].contains(&e.errno_name());
                        if let (Op::Setxattr(p, ..), true) = (op, known) {
                            if foreseen.state(p) != m.state(p) {
                                return Err(format!("{op}: MQFS refused ({e}), the model foresaw a change"));
                            }
                        }
                    }
                }
                for p in ["/a", "/b", "/d"] {
                    let want = m.state(p).and_then(|n| n.xattrs().map(|x| (**x).clone()));
                    let got = match fs.resolve(c, p).await {
                        Ok(ino) => {
                            let mut x = BTreeMap::new();
                            for n in fs.listxattr(c, ino).await.map_err(|e| e.to_string())? {
                                let v = fs.getxattr(c, ino, &n).await.map_err(|e| e.to_string())?;
                                x.insert(n, v);
                            }
                            Some(x)
                        }
                        Err(_) => None,
                    };
                    if got != want {
                        return Err(format!("after {op}: {p} holds {got:?}, the model says {want:?}"));
                    }
                }
            }
            Ok(())
        })
        .expect("run");
        proptest::prop_assert!(out.is_ok(), "{}", out.err().unwrap_or_default());
    }
}
