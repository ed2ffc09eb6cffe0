//! One accepted connection: its slot under `--max-connections`, and the idle watchdog.
//!
//! The slot ([`Counted`]) is held by the socket itself, so a connection upgraded to an attach
//! stream keeps counting until the socket closes, while the HTTP connection that carried the
//! upgrade is long gone.
//!
//! A connection is idle while none of its requests is in flight (a response body still being
//! streamed, a watch say, counts as in flight). After `--idle-connection-timeout` of idleness
//! it is asked to close gracefully: HTTP/1.1 closes at once, HTTP/2 sends GOAWAY. An upgraded
//! connection has left hyper, so no idle rule applies to it any more.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http_body::Frame;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

/// A socket and its connection slot: the slot is given back, and the open-connections gauge
/// lowered, when the socket is dropped.
pub struct Counted<IO> {
    io: IO,
    _slot: Option<OwnedSemaphorePermit>,
    open: Gauge,
}

impl<IO> Counted<IO> {
    /// Wrap `io`, holding `slot` (none when connections are not capped), counted in `open`.
    pub fn new(io: IO, slot: Option<OwnedSemaphorePermit>, open: Gauge) -> Self {
        open.inc();
        Counted {
            io,
            _slot: slot,
            open,
        }
    }
}

impl<IO> Drop for Counted<IO> {
    fn drop(&mut self) {
        self.open.dec();
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Requests in flight on one connection and when the last one began or ended.
#[derive(Debug)]
pub struct Activity {
    start: Instant,
    inflight: AtomicUsize,
    /// Milliseconds after `start` of the last change.
    last_ms: AtomicU64,
}

impl Activity {
    /// A connection accepted now, with nothing in flight.
    pub fn new() -> Arc<Self> {
        Arc::new(Activity {
            start: Instant::now(),
            inflight: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Release);
    }

    /// A request begins; it ends when the guard (moved into its response body) is dropped.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.inflight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InFlight(self.clone())
    }

    /// When the connection, if nothing happens meanwhile, becomes idle for `timeout`; `None`
    /// while a request is in flight.
    fn idle_deadline(&self, timeout: Duration) -> Option<Instant> {
        if self.inflight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        Some(self.start + last + timeout)
    }

    /// Resolves once the connection has had nothing in flight for `timeout`.
    pub async fn idle_for(&self, timeout: Duration) {
        loop {
            match self.idle_deadline(timeout) {
                Some(at) if at <= Instant::now() => {
                    // Re-check after the deadline: a request may have begun meanwhile.
                    if self
                        .idle_deadline(timeout)
                        .is_some_and(|a| a <= Instant::now())
                    {
                        return;
                    }
                }
                Some(at) => tokio::time::sleep_until(at).await,
                // Busy: look again after a full timeout (a request ending restarts the count).
                None => tokio::time::sleep(timeout).await,
            }
        }
    }
}

/// A request in flight on a connection.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.inflight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A response body that keeps its request in flight until it is fully sent or dropped.
pub struct TrackedBody {
    inner: Body,
    _inflight: InFlight,
}

impl TrackedBody {
    /// `inner`, counted as in flight by `inflight`.
    pub fn new(inner: Body, inflight: InFlight) -> Self {
        TrackedBody {
            inner,
            _inflight: inflight,
        }
    }
}

impl http_body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_only_counts_without_requests_in_flight() {
        let a = Activity::new();
        let t = Duration::from_secs(3600);
        assert!(a.idle_deadline(t).is_some());
        let first = a.begin();
        let second = a.begin();
        assert_eq!(a.idle_deadline(t), None);
        drop(first);
        assert_eq!(a.idle_deadline(t), None, "one request is still in flight");
        drop(second);
        let at = a.idle_deadline(t).unwrap();
        assert!(
            at > Instant::now(),
            "idleness is counted from the last request's end"
        );
    }
}
