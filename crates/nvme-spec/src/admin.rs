//! Admin command fields of [`SubmissionEntry`] and admin command constructors (NVMe 1.4 5).

use super::bits::{bit32, get32, set32, setbit32};
use super::command::{AdminOpcode, SubmissionEntry};

impl SubmissionEntry {
    // --- Create/Delete I/O queues (NVMe 1.4 5.3-5.7) ---

    /// QID: CDW10 15:0 of Create/Delete I/O SQ/CQ.
    pub fn queue_id(&self) -> u16 {
        get32(self.dw[10], 15, 0) as u16
    }
    /// Sets CDW10 15:0.
    pub fn set_queue_id(&mut self, qid: u16) {
        self.dw[10] = set32(self.dw[10], 15, 0, qid.into());
    }
    /// Number of queue entries: QSIZE (CDW10 31:16, 0-based) + 1, so 1 to 65536.
    pub fn queue_size(&self) -> u32 {
        get32(self.dw[10], 31, 16) + 1
    }
    /// Sets QSIZE from an entry count (1 to 65536, clamped into that range).
    pub fn set_queue_size(&mut self, entries: u32) {
        self.dw[10] = set32(self.dw[10], 31, 16, entries.clamp(1, 0x1_0000) - 1);
    }
    /// CQID: CDW11 31:16 of Create I/O SQ.
    pub fn cq_id(&self) -> u16 {
        get32(self.dw[11], 31, 16) as u16
    }
    /// Sets CDW11 31:16 (Create I/O SQ).
    pub fn set_cq_id(&mut self, cqid: u16) {
        self.dw[11] = set32(self.dw[11], 31, 16, cqid.into());
    }
    /// QPRIO: CDW11 2:1 of Create I/O SQ (0 urgent, 1 high, 2 medium, 3 low).
    pub fn sq_priority(&self) -> u8 {
        get32(self.dw[11], 2, 1) as u8
    }
    /// Sets CDW11 2:1 (Create I/O SQ).
    pub fn set_sq_priority(&mut self, prio: u8) {
        self.dw[11] = set32(self.dw[11], 2, 1, prio.into());
    }
    /// IV: CDW11 31:16 of Create I/O CQ (MSI-X vector).
    pub fn interrupt_vector(&self) -> u16 {
        get32(self.dw[11], 31, 16) as u16
    }
    /// Sets CDW11 31:16 (Create I/O CQ).
    pub fn set_interrupt_vector(&mut self, iv: u16) {
        self.dw[11] = set32(self.dw[11], 31, 16, iv.into());
    }
    /// IEN: CDW11 bit 1 of Create I/O CQ.
    pub fn interrupts_enabled(&self) -> bool {
        bit32(self.dw[11], 1)
    }
    /// Sets CDW11 bit 1 (Create I/O CQ).
    pub fn set_interrupts_enabled(&mut self, on: bool) {
        self.dw[11] = setbit32(self.dw[11], 1, on);
    }
    /// PC: CDW11 bit 0 of Create I/O SQ/CQ (physically contiguous).
    pub fn physically_contiguous(&self) -> bool {
        bit32(self.dw[11], 0)
    }
    /// Sets CDW11 bit 0.
    pub fn set_physically_contiguous(&mut self, on: bool) {
        self.dw[11] = setbit32(self.dw[11], 0, on);
    }

    // --- Identify (NVMe 1.4 5.15) ---

    /// CNS: CDW10 7:0.
    pub fn cns(&self) -> u8 {
        get32(self.dw[10], 7, 0) as u8
    }
    /// Sets CDW10 7:0.
    pub fn set_cns(&mut self, cns: u8) {
        self.dw[10] = set32(self.dw[10], 7, 0, cns.into());
    }
    /// CNTID: CDW10 31:16.
    pub fn cntid(&self) -> u16 {
        get32(self.dw[10], 31, 16) as u16
    }
    /// Sets CDW10 31:16.
    pub fn set_cntid(&mut self, cntid: u16) {
        self.dw[10] = set32(self.dw[10], 31, 16, cntid.into());
    }

    // --- Get Log Page (NVMe 1.4 5.14) ---

    /// LID: CDW10 7:0.
    pub fn log_page_id(&self) -> u8 {
        get32(self.dw[10], 7, 0) as u8
    }
    /// Sets CDW10 7:0.
    pub fn set_log_page_id(&mut self, lid: u8) {
        self.dw[10] = set32(self.dw[10], 7, 0, lid.into());
    }
    /// Dwords to transfer: (NUMDU (CDW11 15:0) << 16 | NUMDL (CDW10 31:16)) + 1.
    pub fn log_dwords(&self) -> u64 {
        let numd = (get32(self.dw[11], 15, 0) << 16) | get32(self.dw[10], 31, 16);
        u64::from(numd) + 1
    }
    /// Sets NUMDL/NUMDU from a dword count (1 to 2^32, clamped into that range).
    pub fn set_log_dwords(&mut self, dwords: u64) {
        let numd = (dwords.clamp(1, 1 << 32) - 1) as u32;
        self.dw[10] = set32(self.dw[10], 31, 16, numd & 0xFFFF);
        self.dw[11] = set32(self.dw[11], 15, 0, numd >> 16);
    }
    /// Log page offset in bytes: LPOL (CDW12) and LPOU (CDW13).
    pub fn log_offset(&self) -> u64 {
        self.qword(12)
    }
    /// Sets CDW12-13.
    pub fn set_log_offset(&mut self, offset: u64) {
        self.set_qword(12, offset);
    }

    // --- Get/Set Features (NVMe 1.4 5.9, 5.21) ---

    /// FID: CDW10 7:0.
    pub fn feature_id(&self) -> u8 {
        get32(self.dw[10], 7, 0) as u8
    }
    /// Sets CDW10 7:0.
    pub fn set_feature_id(&mut self, fid: u8) {
        self.dw[10] = set32(self.dw[10], 7, 0, fid.into());
    }
    /// SEL: CDW10 10:8 of Get Features (0 current, 1 default, 2 saved, 3 capabilities).
    pub fn feature_select(&self) -> u8 {
        get32(self.dw[10], 10, 8) as u8
    }
    /// Sets CDW10 10:8 (Get Features).
    pub fn set_feature_select(&mut self, sel: u8) {
        self.dw[10] = set32(self.dw[10], 10, 8, sel.into());
    }
    /// SV: CDW10 bit 31 of Set Features (save).
    pub fn feature_save(&self) -> bool {
        bit32(self.dw[10], 31)
    }
    /// Sets CDW10 bit 31 (Set Features).
    pub fn set_feature_save(&mut self, on: bool) {
        self.dw[10] = setbit32(self.dw[10], 31, on);
    }
    /// The feature value: CDW11.
    pub fn feature_value(&self) -> u32 {
        self.dw[11]
    }
    /// Sets CDW11.
    pub fn set_feature_value(&mut self, v: u32) {
        self.dw[11] = v;
    }

    // --- Abort (NVMe 1.4 5.1) ---

    /// SQID of the command to abort: CDW10 15:0.
    pub fn abort_sqid(&self) -> u16 {
        get32(self.dw[10], 15, 0) as u16
    }
    /// CID of the command to abort: CDW10 31:16.
    pub fn abort_cid(&self) -> u16 {
        get32(self.dw[10], 31, 16) as u16
    }

    // --- Constructors ---

    /// Identify with `cns`, namespace `nsid`, data buffer at `prp1` (4 KiB).
    pub fn identify(cid: u16, cns: u8, nsid: u32, prp1: u64) -> Self {
        let mut e = Self::new(AdminOpcode::Identify as u8, cid, nsid);
        e.set_cns(cns);
        e.set_prp1(prp1);
        e
    }

    /// Create I/O CQ `qid` of `entries` entries at `prp1`, physically contiguous.
    pub fn create_io_cq(cid: u16, qid: u16, entries: u32, prp1: u64, vector: u16, ien: bool) -> Self {
        let mut e = Self::new(AdminOpcode::CreateIoCq as u8, cid, 0);
        e.set_queue_id(qid);
        e.set_queue_size(entries);
        e.set_prp1(prp1);
        e.set_interrupt_vector(vector);
        e.set_interrupts_enabled(ien);
        e.set_physically_contiguous(true);
        e
    }

    /// Create I/O SQ `qid` of `entries` entries at `prp1`, bound to CQ `cqid`, priority
    /// `prio` (CDW11 2:1), physically contiguous.
    pub fn create_io_sq(cid: u16, qid: u16, entries: u32, prp1: u64, cqid: u16, prio: u8) -> Self {
        let mut e = Self::new(AdminOpcode::CreateIoSq as u8, cid, 0);
        e.set_queue_id(qid);
        e.set_queue_size(entries);
        e.set_prp1(prp1);
        e.set_cq_id(cqid);
        e.set_sq_priority(prio);
        e.set_physically_contiguous(true);
        e
    }

    /// Delete I/O SQ `qid`.
    pub fn delete_io_sq(cid: u16, qid: u16) -> Self {
        let mut e = Self::new(AdminOpcode::DeleteIoSq as u8, cid, 0);
        e.set_queue_id(qid);
        e
    }

    /// Delete I/O CQ `qid`.
    pub fn delete_io_cq(cid: u16, qid: u16) -> Self {
        let mut e = Self::new(AdminOpcode::DeleteIoCq as u8, cid, 0);
        e.set_queue_id(qid);
        e
    }

    /// Set Features `fid` to `value` (CDW11), not saved.
    pub fn set_features(cid: u16, fid: u8, value: u32) -> Self {
        let mut e = Self::new(AdminOpcode::SetFeatures as u8, cid, 0);
        e.set_feature_id(fid);
        e.set_feature_value(value);
        e
    }

    /// Get Features `fid`, current value (SEL = 0).
    pub fn get_features(cid: u16, fid: u8) -> Self {
        let mut e = Self::new(AdminOpcode::GetFeatures as u8, cid, 0);
        e.set_feature_id(fid);
        e
    }

    /// Get Log Page `lid`, `dwords` dwords from offset 0 into `prp1`, for all namespaces
    /// (NSID FFFFFFFFh).
    pub fn get_log_page(cid: u16, lid: u8, dwords: u64, prp1: u64) -> Self {
        let mut e = Self::new(AdminOpcode::GetLogPage as u8, cid, 0xFFFF_FFFF);
        e.set_log_page_id(lid);
        e.set_log_dwords(dwords);
        e.set_prp1(prp1);
        e
    }

    /// Asynchronous Event Request.
    pub fn async_event_request(cid: u16) -> Self {
        Self::new(AdminOpcode::AsyncEventRequest as u8, cid, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_queues() {
        let cq = SubmissionEntry::create_io_cq(1, 3, 1024, 0x8000, 5, true);
        assert_eq!(cq.opcode(), 0x05);
        assert_eq!(cq.cdw(10), 3 | (1023 << 16));
        assert_eq!(cq.cdw(11), (5 << 16) | 0b11);
        assert_eq!(
            (cq.queue_id(), cq.queue_size(), cq.interrupt_vector()),
            (3, 1024, 5)
        );
        assert!(cq.interrupts_enabled() && cq.physically_contiguous());
        let sq = SubmissionEntry::create_io_sq(2, 3, 0x1_0000, 0x9000, 3, 2);
        assert_eq!(sq.opcode(), 0x01);
        assert_eq!(sq.cdw(10), 3 | (0xFFFF << 16));
        assert_eq!(sq.cdw(11), (3 << 16) | (2 << 1) | 1);
        assert_eq!(
            (sq.queue_size(), sq.cq_id(), sq.sq_priority(), sq.prp1()),
            (0x1_0000, 3, 2, 0x9000)
        );
        let d = SubmissionEntry::delete_io_sq(4, 7);
        assert_eq!((d.opcode(), d.cdw(10)), (0x00, 7));
        let d = SubmissionEntry::delete_io_cq(4, 7);
        assert_eq!((d.opcode(), d.queue_id()), (0x04, 7));
    }

    #[test]
    fn identify_and_features() {
        let id = SubmissionEntry::identify(1, 0x01, 0, 0x4000);
        assert_eq!((id.opcode(), id.cns(), id.prp1()), (0x06, 1, 0x4000));
        let mut id = id;
        id.set_cntid(0x1234);
        assert_eq!(id.cdw(10), 0x1234_0001);
        let sf = SubmissionEntry::set_features(2, 0x07, 0x0003_0003);
        assert_eq!(
            (sf.opcode(), sf.feature_id(), sf.feature_value()),
            (0x09, 7, 0x0003_0003)
        );
        let mut sf = sf;
        sf.set_feature_save(true);
        assert_eq!(sf.cdw(10), 0x8000_0007);
        let mut gf = SubmissionEntry::get_features(3, 0x06);
        gf.set_feature_select(3);
        assert_eq!((gf.opcode(), gf.cdw(10), gf.feature_select()), (0x0A, 0x306, 3));
        assert_eq!(SubmissionEntry::async_event_request(9).opcode(), 0x0C);
    }

    #[test]
    fn get_log_page_dwords() {
        let mut lp = SubmissionEntry::get_log_page(1, 0x02, 128, 0x5000);
        assert_eq!((lp.opcode(), lp.log_page_id(), lp.log_dwords()), (0x02, 2, 128));
        assert_eq!(lp.cdw(10), 0x02 | (127 << 16));
        lp.set_log_dwords(0x2_0000);
        assert_eq!((lp.cdw(10) >> 16, lp.cdw(11) & 0xFFFF), (0xFFFF, 0x1));
        assert_eq!(lp.log_dwords(), 0x2_0000);
        lp.set_log_dwords(1 << 32);
        assert_eq!(lp.log_dwords(), 1 << 32);
        lp.set_log_offset(0x1_0000_0200);
        assert_eq!(
            (lp.cdw(12), lp.cdw(13), lp.log_offset()),
            (0x200, 1, 0x1_0000_0200)
        );
    }

    #[test]
    fn abort_fields() {
        let mut a = SubmissionEntry::new(AdminOpcode::Abort as u8, 1, 0);
        a.set_cdw(10, 0x0042_0003);
        assert_eq!((a.abort_sqid(), a.abort_cid()), (3, 0x42));
    }
}
