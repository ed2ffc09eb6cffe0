//! One stream's accounting: counted in the metrics for its whole life (`active_streams`, bytes
//! each way, duration) and one log line when it ends, whatever ended it. The relay reports to it
//! through [`poddebug_stream::Meter`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;

use crate::metrics::{DirectionLabels, Metrics};

/// Who and what a stream is, for its log line.
#[derive(Clone, Debug, Default)]
pub struct StreamInfo {
    /// `attach` or `log`.
    pub kind: &'static str,
    /// The user.
    pub user: String,
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// The container as the client named it.
    pub container: String,
    /// `websocket/v5.channel.k8s.io`, `spdy/v4.channel.k8s.io`, `http`.
    pub protocol: String,
}

/// Counts one stream in the metrics for its whole life and logs one line when it ends (when
/// dropped, whatever ended it).
pub struct StreamGuard {
    metrics: Arc<Metrics>,
    info: StreamInfo,
    start: Instant,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    counter_in: Counter,
    counter_out: Counter,
    end: std::sync::Mutex<&'static str>,
}

impl StreamGuard {
    /// Start counting a stream (`active_streams` goes up now, down on drop).
    pub fn new(metrics: Arc<Metrics>, info: StreamInfo) -> StreamGuard {
        metrics.active_streams.inc();
        let counter = |d: &str| {
            metrics
                .stream_bytes
                .get_or_create(&DirectionLabels {
                    direction: d.to_owned(),
                })
                .clone()
        };
        let (counter_in, counter_out) = (counter("in"), counter("out"));
        StreamGuard {
            metrics,
            info,
            start: Instant::now(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            counter_in,
            counter_out,
            end: std::sync::Mutex::new("dropped"),
        }
    }

    /// The stream's description.
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// Update the protocol label once it is known.
    pub fn set_protocol(&mut self, protocol: String) {
        self.info.protocol = protocol;
    }

    /// Bytes client → container.
    pub fn add_in(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
        self.counter_in.inc_by(n as u64);
    }

    /// Bytes container → client.
    pub fn add_out(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
        self.counter_out.inc_by(n as u64);
    }

    /// Why the stream ended (the first reason given wins over later ones).
    pub fn set_end(&self, why: &'static str) {
        if let Ok(mut e) = self.end.lock()
            && *e == "dropped"
        {
            *e = why;
        }
    }

    /// Bytes relayed so far (in, out).
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.bytes_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
        )
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.metrics.active_streams.dec();
        let elapsed = self.start.elapsed();
        self.metrics.stream_duration.observe(elapsed.as_secs_f64());
        let (bytes_in, bytes_out) = self.bytes();
        let end = self.end.lock().map(|e| *e).unwrap_or("unknown");
        tracing::info!(
            stream = self.info.kind,
            user = %self.info.user,
            namespace = %self.info.namespace,
            pod = %self.info.pod,
            container = %self.info.container,
            protocol = %self.info.protocol,
            bytes_in,
            bytes_out,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            end,
            "stream ended"
        );
    }
}

impl poddebug_stream::Meter for StreamGuard {
    fn inbound(&self, n: usize) {
        self.add_in(n);
    }

    fn outbound(&self, n: usize) {
        self.add_out(n);
    }

    fn end(&self, why: &'static str) {
        self.set_end(why);
    }
}
