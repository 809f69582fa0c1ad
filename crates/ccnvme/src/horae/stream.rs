//! Streams (Horae 5.6.1, Table 1): `olayer_init_stream(sid, param)` and the
//! partition of the PMR among streams.
//!
//! A stream is one sequence of ordered writes with its own ordering queue
//! (its own head, `flushed` and tail pointers and ring). The PMR room after
//! [`crate::BlockDevice::pmr_free_start`] of the stream's first device is
//! cut into `streams` equal slices and stream `sid` owns slice `sid` ("To
//! realize multiple streams, HORAE evenly partitions the CMB area and
//! p-area, and assigns a portion to each stream"). The p-area the upper
//! layer reserves ([`StreamParams::p_area`]) is cut the same way
//! ([`super::PArea::slice`]). Two streams share nothing: neither their
//! region, their p-area slice nor their locks, so their appends and
//! flushes never wait for each other.
//!
//! A stream may span several devices (Horae 5.1: "dispatch the data blocks
//! to arbitrary hardware queues or storage devices"): each entry names its
//! destination device by its index in the list given at
//! [`super::OrderingQueue::init_stream`] (Figure 6's `devid`), and the
//! joint FLUSH flushes every device the flushed range touches
//! ([`super::OrderingQueue::flush_through`]).

use std::rc::Rc;

use super::layout::Geometry;
use crate::device::BlockDevice;
use crate::error::DriverError;

/// The `param` of `olayer_init_stream(sid, param)`: which stream of how
/// many, and the ring's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamParams {
    /// The stream's id (`sid`): its slice of the PMR.
    pub stream: u16,
    /// Streams the PMR is partitioned into (every stream of one PMR must
    /// be set up with the same number).
    pub streams: u16,
    /// Entries of the ring when the slice is formatted (default: all that
    /// fit the slice); ignored when attaching to a formatted slice.
    pub capacity: Option<u32>,
    /// The checkpoint region the upper layer reserved for this stream on
    /// its first device, where a full queue is swapped to (Horae 5.2;
    /// [`super::swap`]); `None`: a full queue waits for dequeue instead.
    /// Recovery must be given the same region.
    pub checkpoint: Option<super::CheckpointRegion>,
    /// The p-area the upper layer reserved on every device of the stream
    /// for write redirection (Horae 5.4), shared evenly by the `streams`
    /// streams; `None`: in-place writes are not redirected
    /// ([`super::redirect`]).
    pub p_area: Option<super::PArea>,
    /// The cores of the stream's background submitter threads (Horae 6.2,
    /// `super::submitter`): the caller of [`super::OrderingQueue::submit`]
    /// hands the data bio to its core's submitter and returns, and the
    /// submitter sends it through the block layer on its own core. `None`:
    /// the caller submits it (the released module without
    /// `ENABLE_BG_SUBMITTER`).
    pub submitters: Option<super::Submitters>,
}

impl StreamParams {
    /// The single stream of a PMR, with the largest ring.
    pub const SINGLE: StreamParams = StreamParams {
        stream: 0,
        streams: 1,
        capacity: None,
        checkpoint: None,
        p_area: None,
        submitters: None,
    };

    /// Stream `stream` of `streams`, with the largest ring of its slice.
    pub fn stream(stream: u16, streams: u16) -> StreamParams {
        StreamParams {
            stream,
            streams,
            capacity: None,
            checkpoint: None,
            p_area: None,
            submitters: None,
        }
    }

    /// The same parameters with the checkpoint region `region` (this
    /// stream's own range of the first device).
    pub fn with_checkpoint(self, region: super::CheckpointRegion) -> StreamParams {
        StreamParams {
            checkpoint: Some(region),
            ..self
        }
    }

    /// The same parameters with the p-area `area` (all streams' range).
    pub fn with_p_area(self, area: super::PArea) -> StreamParams {
        StreamParams {
            p_area: Some(area),
            ..self
        }
    }

    /// The same parameters with background submitters on `cores`.
    pub fn with_submitters(self, cores: super::Submitters) -> StreamParams {
        StreamParams {
            submitters: Some(cores),
            ..self
        }
    }

    /// This stream's slice of the p-area on each device, with the
    /// device's LBAs per 4 KiB page (empty without a p-area), checked
    /// against each device.
    pub(super) fn p_area_slices(
        &self,
        devices: &[Rc<BlockDevice>],
    ) -> Result<Vec<(super::PArea, u64)>, DriverError> {
        let Some(area) = self.p_area else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(devices.len());
        for d in devices {
            let pp = (4096 / d.info().lba_size.max(1)) as u64;
            area.check(d.info().blocks, pp)?;
            let s = area.slice(self.stream, self.streams, pp);
            if s.pages == 0 {
                return Err(DriverError::Invalid(format!(
                    "a p-area of {} pages has no page for each of {} streams",
                    area.pages, self.streams
                )));
            }
            out.push((s, pp));
        }
        Ok(out)
    }

    /// Checks the parameters against the stream's devices: at least one,
    /// at most 255 (`devid` is 8 bits; the devices must be on one machine). Returns the
    /// first device (the queue's home) and the header geometry.
    pub(super) fn check<'d>(
        &self,
        devices: &'d [Rc<BlockDevice>],
    ) -> Result<(&'d Rc<BlockDevice>, Geometry), DriverError> {
        let Some(home) = devices.first() else {
            return Err(DriverError::Invalid("a stream needs a device".into()));
        };
        let n = u8::try_from(devices.len())
            .map_err(|_| DriverError::Invalid(format!("{} devices: devid is 8 bits", devices.len())))?;
        let g = Geometry {
            devices: n,
            stream: self.stream,
            streams: self.streams,
        };
        if !g.valid() {
            return Err(DriverError::Invalid(format!(
                "stream {} of {} does not exist",
                self.stream, self.streams
            )));
        }
        let cores = home.machine().core_count();
        if let Some(sub) = self
            .submitters
            .filter(|s| s.count == 0 || s.first + s.count > cores)
        {
            return Err(DriverError::Invalid(format!(
                "{} submitters from core {} on a machine with {cores} cores",
                sub.count, sub.first
            )));
        }
        Ok((home, g))
    }
}

impl super::OrderingQueue {
    /// `olayer_submit_bio(bio, sid)` (Horae Table 1): appends `bio` as an
    /// epoch of its own to this stream, for device `device` of the stream,
    /// and submits it; returns once its entry and the tail are persistent
    /// (the ordering guarantee), with the handle of the data write (wait
    /// for it with [`BlockDevice::wait`] on the device). `bio` must be a
    /// write of whole 4 KiB pages to blocks whose old content is dead.
    pub async fn submit_bio(
        self: &Rc<Self>,
        core: usize,
        device: u8,
        bio: &crate::Bio,
    ) -> Result<crate::Done, DriverError> {
        self.submit_ordered(core, device, bio, false).await
    }

    /// `olayer_submit_bio_ipu(bio, sid)` (Horae Table 1): as
    /// [`super::OrderingQueue::submit_bio`] for an in-place update of live
    /// data: redirected to the p-area if the stream has one, else the
    /// entry's `ipu` bit only (see [`super::OrderedWrite::in_place`]).
    pub async fn submit_bio_ipu(
        self: &Rc<Self>,
        core: usize,
        device: u8,
        bio: &crate::Bio,
    ) -> Result<crate::Done, DriverError> {
        self.submit_ordered(core, device, bio, true).await
    }

    async fn submit_ordered(
        self: &Rc<Self>,
        core: usize,
        device: u8,
        bio: &crate::Bio,
        in_place: bool,
    ) -> Result<crate::Done, DriverError> {
        if bio.op != crate::BioOp::Write {
            return Err(DriverError::Invalid("an ordered bio is a write".into()));
        }
        let len = u32::try_from(bio.blocks())
            .map_err(|_| DriverError::Invalid(format!("a bio of {} blocks", bio.blocks())))?;
        let w = super::OrderedWrite {
            in_place,
            ..super::OrderedWrite::fresh(bio.lba.0, len).on(device)
        };
        let e = self.append_writes(core, &[w]).await?;
        let id = e
            .entry(0)
            .ok_or_else(|| DriverError::Invalid("an epoch of one write has no entry".into()))?;
        self.submit(core, id, bio).await
    }
}
