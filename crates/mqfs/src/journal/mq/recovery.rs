//! Recovery of the journal areas after a crash (ccNVMe 5.5, checklist M8,
//! M9).

use super::*;

/// A journal description block found by recovery.
struct FoundTx {
    area: u32,
    txid: u64,
    /// (home, log position) of every copy.
    tags: Vec<(u64, u64)>,
    revokes: Vec<u64>,
}

/// Replays the journal areas after a crash (checklist M8): scans each area
/// from its head while the JH sequence continues and the copies check,
/// drops the transactions `unfinished` (and, under the global prefix rule,
/// every id at or above its lowest), merges the rest by id, honours
/// revokes, writes the newest copies home, flushes, and restarts every area
/// empty. Returns per-area (position, next sequence) and the highest id
/// seen.
pub(crate) async fn recover(
    fs: &Fs,
    ctx: Ctx,
    unfinished: &BTreeSet<u64>,
    rule: RecoveryRule,
) -> Result<(Vec<(u64, u64)>, u64), FsError> {
    let sb = fs.sb.borrow().clone();
    let mut found: Vec<FoundTx> = Vec::new();
    let mut starts = Vec::new();
    let mut max_txid = 0u64;
    let mut home_below = 0u64;
    for a in 0..sb.journal_areas {
        let start = sb.area_start(a);
        let ring = sb.area_blocks - 1;
        let adv = |p: u64, by: u64| (p - 1 + by) % ring + 1;
        let raw = fs.read_raw(ctx, start).await?;
        let jsb = AreaSuper::decode(&raw[..], a, sb.area_blocks)?;
        home_below = home_below.max(jsb.home_below);
        let (mut pos, mut seq) = (jsb.head, jsb.seq);
        let mut scanned = 0u64;
        'scan: while scanned < ring {
            // A transaction: descriptors of its sequence number, each
            // followed by its copies, the last one (the JH) flagged.
            let mut tags = Vec::new();
            let mut next = pos;
            let txid = loop {
                let b = fs.read_raw(ctx, start + next).await?;
                let Some(d) = Descriptor::decode(&b[..]).filter(|d| d.seq == seq) else {
                    break 'scan;
                };
                next = adv(next, 1);
                for t in &d.tags {
                    if t.journal != next {
                        break 'scan;
                    }
                    let copy = fs.read_raw(ctx, start + t.journal).await?;
                    if crc(&copy[..]) != t.crc {
                        break 'scan;
                    }
                    tags.push((t.home, t.journal));
                    next = adv(next, 1);
                }
                scanned += 1 + d.tags.len() as u64;
                if d.last {
                    break d.txid;
                }
                if scanned >= ring {
                    break 'scan;
                }
            };
            let mut revokes = Vec::new();
            loop {
                let r = fs.read_raw(ctx, start + next).await?;
                match Revoke::decode(&r[..]).filter(|r| r.seq == seq) {
                    Some(r) => {
                        revokes.extend(r.blocks);
                        next = adv(next, 1);
                    }
                    None => break,
                }
            }
            max_txid = max_txid.max(txid);
            found.push(FoundTx {
                area: a,
                txid,
                tags,
                revokes,
            });
            pos = next;
            seq += 1;
        }
        starts.push((pos, seq));
    }
    let cutoff = match rule {
        RecoveryRule::GlobalPrefix => unfinished.iter().min().copied().unwrap_or(u64::MAX),
        RecoveryRule::PaperLiteral => u64::MAX,
    };
    let mut kept: Vec<&FoundTx> = found
        .iter()
        .filter(|t| t.txid >= home_below && !unfinished.contains(&t.txid) && t.txid < cutoff)
        .collect();
    kept.sort_by_key(|t| t.txid);
    // A revoke in transaction t hides versions from ids below t.
    let mut revoked: BTreeMap<u64, u64> = BTreeMap::new();
    for t in &kept {
        for b in &t.revokes {
            let e = revoked.entry(*b).or_insert(t.txid);
            *e = (*e).max(t.txid);
        }
    }
    let mut replay: BTreeMap<u64, (u32, u64)> = BTreeMap::new();
    for t in &kept {
        for (home, j) in &t.tags {
            if revoked.get(home).is_some_and(|r| *r > t.txid) {
                continue;
            }
            replay.insert(*home, (t.area, *j));
        }
    }
    let mut writes = Vec::new();
    for (home, (area, j)) in replay {
        if home == 0 || home >= sb.journal_start {
            return Err(FsError::Corrupt(format!("journal replays block {home}")));
        }
        writes.push((home, fs.read_raw(ctx, sb.area_start(area) + j).await?));
    }
    if !writes.is_empty() {
        fs.write_all(ctx, &writes, BioFlags::NONE).await?;
        fs.flush(ctx).await?;
    }
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
        fs.write_all(ctx, &[(sb.area_start(a as u32), jsb.encode())], BioFlags::FUA)
            .await?;
    }
    Ok((starts, next_id - 1))
}
