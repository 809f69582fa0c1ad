//! The latest view serves every namespace call with no write to
//! persistent memory; the persister's edges come later; the same seed
//! gives the same persistent-memory trace.

mod common;

use common::run;
use fsapi::FileSystem as _;
use soupfs::Faults;

#[test]
fn namespace_calls_write_nothing_to_persistent_memory() {
    run(4, Faults::default(), false, |fs, c| async move {
        let before = fs.pmem().trace().len();
        fs.mkdir_path(c, "/d").await?;
        let f = fs.create_path(c, "/d/f").await?;
        fs.link_path(c, "/d/f", "/g").await?;
        fs.rename_path(c, "/g", "/d/h").await?;
        fs.chmod(c, f.ino, 0o600).await?;
        fs.unlink_path(c, "/d/f").await?;
        fs.mkdir_path(c, "/e").await?;
        fs.rmdir_path(c, "/e").await?;
        assert_eq!(fs.pmem().trace().len(), before, "no store, flush or fence");
        assert!(fs.pending_ops().await > 0);
        fs.sync(c).await?;
        assert_eq!(fs.pending_ops().await, 0);
        assert!(fs.pmem().trace().len() > before, "the persister wrote them");
        Ok(())
    });
}

#[test]
fn the_background_persister_drains_the_dirty_inodes_within_its_interval() {
    run(5, Faults::default(), true, |fs, c| async move {
        fs.create_path(c, "/a").await?;
        fs.write_path(c, "/a", 0, b"data").await?;
        assert_eq!(fs.pending_ops().await, 2);
        let sim = fs.sim();
        sim.sleep(fs.profile().persister_interval * 2).await;
        assert_eq!(fs.pending_ops().await, 0);
        let s = fs.persist_stats().await;
        assert_eq!((s.ops, s.rounds), (2, 1));
        Ok(())
    });
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let hash = |seed| {
        let (pm, ()) = run(seed, Faults::default(), true, |fs, c| async move {
            for i in 0..5 {
                let p = format!("/f{i}");
                fs.create_path(c, &p).await?;
                fs.write_path(c, &p, 0, &[i as u8; 300]).await?;
            }
            fs.sim().sleep(fs.profile().persister_interval * 2).await;
            Ok(())
        });
        let h = pm.trace().hash();
        h
    };
    assert_eq!(hash(6), hash(6));
}
