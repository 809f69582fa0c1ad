//! Recovery of the journal areas after a crash (ccNVMe 5.5, `docs/decisions.md` M8,
//! M9): each area scanned by the shared scanner ([`log::scan`], a
//! transaction ending at its JH and revokes, [`End::LastDescriptor`]), the
//! unfinished ids dropped, the rest replayed by id ([`Replay`], a revoke
//! hiding only lower ids, [`RevokeScope::Earlier`]).

use super::*;
use crate::journal::log::{self, End, Found, Replay, RevokeScope, Ring};

/// Replays the journal areas after a crash (`docs/decisions.md` M8): scans each area
/// from its head while the JH sequence continues and the copies check,
/// drops the transactions `unfinished` (and, under the global prefix rule,
/// every id at or above its lowest), merges the rest by id, honours
/// revokes, writes the newest copies home, flushes, and restarts every area
/// empty. A damaged transaction (not one the driver reports unfinished)
/// ends its area's scan, is recorded ([`Fs::journal_damage`]) and, like an
/// unfinished one under the global prefix rule, drops every id at or above
/// its own in every area, so what is replayed is a prefix of the
/// transaction order. Returns per-area (position, next sequence) and the highest id
/// seen. `scope` is MQFS's [`RevokeScope::Earlier`]; JBD2 committing
/// through ccNVMe (one area, `jbd::JbdCommit::CcNvmeTransaction`) runs
/// this recovery with its own [`RevokeScope::ThisAndEarlier`].
pub(crate) async fn recover(
    fs: &Fs,
    ctx: Ctx,
    unfinished: &BTreeSet<u64>,
    rule: RecoveryRule,
    scope: RevokeScope,
) -> Result<(Vec<(u64, u64)>, u64), FsError> {
    let sb = fs.sb.borrow().clone();
    let mut found: Vec<(u64, Found)> = Vec::new();
    let mut starts = Vec::new();
    let mut home_below = 0u64;
    // Ids at or above this are not replayed: a damaged transaction's.
    let mut damaged_below = u64::MAX;
    for a in 0..sb.journal_areas {
        let ring = Ring::of(&sb, a);
        let raw = fs.read_raw(ctx, ring.start).await?;
        let jsb = AreaSuper::decode(&raw[..], a, sb.area_blocks)?;
        home_below = home_below.max(jsb.home_below);
        let s = log::scan(fs, ctx, a, ring, jsb.head, jsb.seq, End::LastDescriptor).await?;
        if let Some(d) = s.damage.clone() {
            // A transaction the driver reports unfinished may have any
            // block missing: that is a crash, not damage.
            if !d.txid.is_some_and(|t| unfinished.contains(&t)) {
                // Its id, or (a damaged JH hides it) the lowest it can be:
                // nothing at or above it is replayed, in any area.
                let last_intact = s.txs.last().map_or(jsb.home_below, |t| t.txid + 1);
                damaged_below = damaged_below.min(d.txid.unwrap_or(last_intact));
                fs.note_journal_damage(d);
            }
        }
        found.extend(s.txs.into_iter().map(|t| (ring.start, t)));
        starts.push((s.pos, s.seq));
    }
    let max_txid = found.iter().map(|(_, t)| t.txid).max().unwrap_or(0);
    let cutoff = match rule {
        RecoveryRule::GlobalPrefix => unfinished.iter().min().copied().unwrap_or(u64::MAX),
        RecoveryRule::PaperLiteral => u64::MAX,
    };
    let mut kept: Vec<(u64, &Found)> = found
        .iter()
        .filter(|(_, t)| {
            t.txid >= home_below && !unfinished.contains(&t.txid) && t.txid < cutoff && t.txid < damaged_below
        })
        .map(|(start, t)| (*start, t))
        .collect();
    kept.sort_by_key(|(_, t)| t.txid);
    // MQFS: a revoke in transaction t hides versions from ids below t.
    Replay::resolve(&kept, scope).apply(fs, ctx).await?;
    // Every area restarts empty past what it held: discarded transactions'
    // blocks are behind the new head and never replayed again, and every
    // id seen is home (or discarded) should a crash cut this loop short.
    let max_unfinished = unfinished.iter().max().copied().unwrap_or(0);
    let next_id = max_txid.max(max_unfinished).max(home_below) + 1;
    for (a, (pos, seq)) in starts.iter().enumerate() {
        let jsb = AreaSuper {
            area: a as u32,
            head: *pos,
            seq: *seq,
            home_below: next_id,
        };
        let ring = Ring::of(&sb, a as u32);
        log::write_super(fs, ctx, ring, &jsb).await?;
    }
    Ok((starts, next_id - 1))
}
