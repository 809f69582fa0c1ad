//! Switches that turn one mechanism off each, so the crash tests can show
//! that mechanism is what keeps the file system consistent (a canary: the
//! crash checker must report every switch).

/// Mechanisms to switch off. The default switches nothing off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Do not `clwb` the undo-log entries: under ADR an in-place update may
    /// persist while the old bytes it overwrote never reached the log.
    pub skip_log_flush: bool,
    /// Do not `sfence` between the undo-log entries and the in-place
    /// updates: an in-place line may be written back before its log entry.
    pub skip_log_fence: bool,
    /// Do not write (flush, fence) the commit entry: a returned operation
    /// looks uncommitted and recovery rolls it back.
    pub skip_commit: bool,
    /// Recovery does not roll back an uncommitted transaction: a torn
    /// operation stays half-applied.
    pub skip_rollback: bool,
}
