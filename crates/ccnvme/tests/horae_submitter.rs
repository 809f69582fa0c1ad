//! HoRAE's background submitters (Horae 6.2): an ordered write's caller
//! pays the ordering layer and hands the data bio over; the block layer
//! runs on the submitter's core, the handle still completes once the write
//! is durable, and a full ring sends the caller back to submitting itself.

use std::rc::Rc;

use ccnvme::horae::{OrderedWrite, OrderingQueue, StreamParams, Submitters};
use ccnvme::{Bio, BlockDevice, DriverError, DriverProfile, ProbeOptions};
use pcie_sim::{Executor, Machine, SimDuration};

mod common;

/// What a burst of `n` ordered writes from core 0 cost.
#[derive(Debug)]
struct Burst {
    /// Kernel time of core 0 (the caller) while submitting, per write.
    caller_busy_us: f64,
    /// Kernel time of core 1 (the submitter, if any) over the run.
    submitter_busy_us: f64,
}

fn rig(ring: u32) -> (Executor, Machine, Rc<BlockDevice>) {
    common::optane_device(ProbeOptions {
        ccnvme: false,
        horae: true,
        profile: DriverProfile {
            horae_submitter_ring: ring,
            ..DriverProfile::default()
        },
        ..ProbeOptions::default()
    })
}

/// One epoch of `n` ordered 4 KiB writes from core 0 to blocks 0.., then
/// waits for all and checks the media holds them.
fn burst(params: StreamParams, ring: u32, n: u64) -> Burst {
    let (ex, m, dev) = rig(ring);
    let pages = common::pages(&m, n as usize, 7);
    let m2 = m.clone();
    let (caller, sub) = ex
        .block_on(async move {
            let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params).await?;
            let busy = |c: usize| m2.core(c).map(|c| c.stats().kernel);
            let (c0, s0) = (busy(0)?, busy(1)?);
            // One epoch of n writes: the caller then submits them back to
            // back, faster than one submitter drains them.
            let writes: Vec<OrderedWrite> = (0..n).map(|i| OrderedWrite::fresh(i, 1)).collect();
            let e = q.append_writes(0, &writes).await?;
            let mut done = Vec::new();
            for (i, p) in pages.iter().enumerate() {
                let id = e.entry(i as u32).expect("an entry per write");
                done.push(q.submit(0, id, &Bio::write(i as u64, vec![*p])).await?);
            }
            let caller = busy(0)? - c0;
            for d in &done {
                assert!(dev.wait(0, d).await.is_success(), "an ordered write failed");
            }
            q.flush(0).await?;
            for (i, p) in pages.iter().enumerate() {
                let out = m2.memory().alloc(4096)?;
                dev.submit_wait(0, &Bio::read(i as u64, vec![out])).await?;
                let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 4096]);
                m2.memory().read(out, &mut a)?;
                m2.memory().read(*p, &mut b)?;
                assert_eq!(a, b, "block {i} holds its write");
            }
            Ok::<_, DriverError>((caller, busy(1)? - s0))
        })
        .unwrap()
        .unwrap();
    let us = |d: SimDuration| d.as_us_f64();
    Burst {
        caller_busy_us: us(caller) / n as f64,
        submitter_busy_us: us(sub),
    }
}

const ONE: Submitters = Submitters { first: 1, count: 1 };

#[test]
fn the_submitter_takes_the_block_layer_off_the_caller() {
    let n = 32;
    let block_layer = DriverProfile::default().block_layer.as_us_f64();
    let caller = burst(StreamParams::SINGLE, 1024, n);
    let delegated = burst(StreamParams::SINGLE.with_submitters(ONE), 1024, n);
    assert!(
        delegated.caller_busy_us + block_layer <= caller.caller_busy_us,
        "the caller saves at least the block layer per write: {delegated:?} against {caller:?}"
    );
    assert!(
        delegated.submitter_busy_us >= n as f64 * block_layer,
        "the submitter's core pays the block layer of every write: {delegated:?}"
    );
    assert_eq!(
        caller.submitter_busy_us, 0.0,
        "without a submitter core 1 stays idle"
    );
}

#[test]
fn a_full_ring_sends_the_caller_back_to_the_block_layer() {
    let n = 32;
    let block_layer = DriverProfile::default().block_layer.as_us_f64();
    let roomy = burst(StreamParams::SINGLE.with_submitters(ONE), 1024, n);
    let full = burst(StreamParams::SINGLE.with_submitters(ONE), 1, n);
    assert!(
        full.caller_busy_us >= roomy.caller_busy_us + block_layer / 2.0,
        "with a ring of one bio the caller submits part of the burst itself: {full:?} against {roomy:?}"
    );
}

#[test]
fn submitters_the_machine_lacks_are_refused() {
    for bad in [
        Submitters { first: 1, count: 0 },
        Submitters { first: 3, count: 2 },
    ] {
        let (ex, _m, dev) = rig(1024);
        let r = ex
            .block_on(async move {
                OrderingQueue::init_stream(&[dev], StreamParams::SINGLE.with_submitters(bad))
                    .await
                    .map(|_| ())
            })
            .unwrap();
        assert!(matches!(r, Err(DriverError::Invalid(_))), "{bad:?}: {r:?}");
    }
}

#[test]
fn a_bio_the_submitter_cannot_send_fails_its_handle() {
    // A write of 1024 blocks (4 MiB) is past the device's largest
    // transfer: the block layer refuses the bio (the ordering layer takes
    // the entry). The caller without a submitter gets the error from
    // `submit`; with one, `submit` has returned and the handle fails.
    const N: u32 = 1024;
    for params in [StreamParams::SINGLE, StreamParams::SINGLE.with_submitters(ONE)] {
        let (ex, m, dev) = rig(1024);
        assert!(
            u64::from(N) * 4096 > dev.info().max_transfer,
            "the write is too large"
        );
        let pages = common::pages(&m, N as usize, 3);
        let r = ex
            .block_on(async move {
                let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params).await?;
                let e = q.append_writes(0, &[OrderedWrite::fresh(0, N)]).await?;
                let id = e.entry(0).expect("one entry");
                let done = q.submit(0, id, &Bio::write(0, pages)).await?;
                Ok::<_, DriverError>(dev.wait(0, &done).await)
            })
            .unwrap();
        match params.submitters {
            None => assert!(matches!(r, Err(DriverError::Invalid(_))), "{r:?}"),
            Some(_) => assert!(matches!(r, Ok(s) if !s.is_success()), "{r:?}"),
        }
    }
}
