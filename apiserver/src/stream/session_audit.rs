//! The audit record of one attach session: a single structured log event with target
//! `poddebug::audit` (`event="session"`) when the session has ended, carrying who attached
//! (user and groups), to what (namespace, pod, container), how (protocol), when (start and
//! end, RFC 3339), how much (bytes each way), how it ended (the process's exit code, when
//! known) and where it was recorded (the recording id, when recording is on).

use poddebug_storage::Caller;

use super::relay::StreamInfo;

/// What one session's record says.
#[derive(Clone, Debug)]
pub struct SessionRecord<'a> {
    /// Who attached.
    pub caller: &'a Caller,
    /// What was attached to and how.
    pub info: &'a StreamInfo,
    /// When the relay started.
    pub start: jiff::Timestamp,
    /// When the relay ended.
    pub end: jiff::Timestamp,
    /// Bytes client → container.
    pub bytes_in: u64,
    /// Bytes container → client.
    pub bytes_out: u64,
    /// The process's exit code, when known.
    pub exit_code: Option<i32>,
    /// The recording, when recording is on and it could be started.
    pub recording_id: Option<&'a str>,
}

/// Write the record.
pub fn emit(r: &SessionRecord<'_>) {
    tracing::info!(
        target: "poddebug::audit",
        event = "session",
        user = %r.caller.user,
        groups = %r.caller.groups.join(","),
        namespace = %r.info.namespace,
        pod = %r.info.pod,
        container = %r.info.container,
        protocol = %r.info.protocol,
        start = %r.start,
        end = %r.end,
        bytes_in = r.bytes_in,
        bytes_out = r.bytes_out,
        exit_code = r.exit_code.map(i64::from),
        recording_id = r.recording_id.unwrap_or(""),
        "debug session ended"
    );
}
