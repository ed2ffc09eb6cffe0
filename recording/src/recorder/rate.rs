//! `--max-recording-rate`: a token bucket of recorded bytes per session, filled at the rate up
//! to [`BURST_SECONDS`] of it.
//!
//! best-effort ([`RateBudget::admit`]): once an event finds the bucket short, events are
//! skipped until it is full again, so a flood of output leaves one gap (and one marker) per
//! burst, not one per chunk. strict ([`RateBudget::reserve`]): every event is taken, the bucket
//! may go into debt, and the stream waits until the debt is paid back.

/// How many seconds' worth of `--max-recording-rate` a session may record at once.
pub const BURST_SECONDS: f64 = 8.0;

/// The bucket.
#[derive(Debug)]
pub struct RateBudget {
    /// Bytes per second; 0 = no limit.
    rate: f64,
    tokens: f64,
    /// Session time of the last refill, seconds.
    at: f64,
    /// Bytes skipped since the gap began (0: not skipping).
    skipped: u64,
}

impl RateBudget {
    /// A full bucket for `rate` bytes per second (0 = no limit).
    pub fn new(rate: u64) -> RateBudget {
        let rate = rate as f64;
        RateBudget {
            rate,
            tokens: rate * BURST_SECONDS,
            at: 0.0,
            skipped: 0,
        }
    }

    fn refill(&mut self, t: f64) {
        let full = self.rate * BURST_SECONDS;
        self.tokens = (self.tokens + (t - self.at).max(0.0) * self.rate).min(full);
        self.at = self.at.max(t);
    }

    /// best-effort: whether an event of `len` bytes at `t` seconds is recorded; counts it
    /// either way.
    pub fn admit(&mut self, t: f64, len: usize) -> bool {
        if self.rate == 0.0 {
            return true;
        }
        self.refill(t);
        let full = self.rate * BURST_SECONDS;
        let len = len as f64;
        let resume = self.skipped == 0 || self.tokens >= full;
        if resume && self.tokens >= len {
            self.tokens -= len;
            true
        } else {
            self.skipped += len as u64;
            false
        }
    }

    /// strict: take `len` bytes at `t` seconds, into debt if need be; how long, in seconds, the
    /// stream must wait for the debt to be paid back (0 when there is none).
    pub fn reserve(&mut self, t: f64, len: usize) -> f64 {
        if self.rate == 0.0 {
            return 0.0;
        }
        self.refill(t);
        self.tokens -= len as f64;
        if self.tokens < 0.0 {
            -self.tokens / self.rate
        } else {
            0.0
        }
    }

    /// The bytes of the gap that just ended (0: none), and the gap closed.
    pub fn end_gap(&mut self) -> u64 {
        std::mem::take(&mut self.skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_budget_skips_a_flood_and_resumes_when_full_again() {
        // 100 bytes/s: 800 bytes at once, then nothing until 8 s' worth has built up again.
        let mut b = RateBudget::new(100);
        assert!(b.admit(0.0, 800));
        assert!(!b.admit(0.05, 10), "the bucket is empty");
        assert!(
            !b.admit(2.0, 10),
            "200 bytes back, but the gap lasts until it is full"
        );
        assert!(!b.admit(7.0, 10));
        assert!(b.admit(9.0, 10), "full again after 8 s");
        assert_eq!(b.end_gap(), 30);
        assert!(b.admit(9.1, 10), "small events go on while tokens last");
        assert_eq!(b.end_gap(), 0);
        let mut none = RateBudget::new(0);
        assert!(none.admit(0.0, usize::MAX));
    }

    #[test]
    fn strict_reservations_wait_out_their_debt() {
        // 100 bytes/s, 800 at once: the next 200 bytes wait 2 s.
        let mut b = RateBudget::new(100);
        assert_eq!(b.reserve(0.0, 800), 0.0);
        assert!((b.reserve(0.0, 200) - 2.0).abs() < 1e-9);
        // Two seconds later the debt is paid: 50 more bytes wait half a second.
        assert!((b.reserve(2.0, 50) - 0.5).abs() < 1e-9);
        // Idle long enough, the bucket is full again (never more).
        assert_eq!(b.reserve(100.0, 800), 0.0);
        assert!(b.reserve(100.0, 1) > 0.0);
        assert_eq!(RateBudget::new(0).reserve(0.0, usize::MAX), 0.0);
    }
}
