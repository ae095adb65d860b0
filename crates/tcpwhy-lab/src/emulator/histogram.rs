//! The latency histogram and the emulator's counters.

use super::*;

/// Log-linear histogram of microsecond values: exact below 128, then 64 buckets per power of
/// two (under 1.6 % error). Fixed size, no allocation after construction.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    pub(super) counts: Vec<u64>,
    pub(super) total: u64,
    pub(super) max: u64,
}

pub(super) const HIST_LINEAR: u64 = 128;
pub(super) const HIST_SUB_BITS: u32 = 6;

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; Self::bucket(u64::MAX) + 1],
            total: 0,
            max: 0,
        }
    }
}

impl LatencyHistogram {
    pub(super) fn bucket(v: u64) -> usize {
        if v < HIST_LINEAR {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= 7
        let sub = (v >> (exp - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1);
        (HIST_LINEAR + u64::from(exp - 7) * (1 << HIST_SUB_BITS) + sub) as usize
    }

    pub(super) fn lower_bound(index: usize) -> u64 {
        let i = index as u64;
        if i < HIST_LINEAR {
            return i;
        }
        let k = i - HIST_LINEAR;
        let exp = k / (1 << HIST_SUB_BITS) + 7;
        let sub = k % (1 << HIST_SUB_BITS);
        (1 << exp) + (sub << (exp - u64::from(HIST_SUB_BITS)))
    }

    pub fn record(&mut self, us: u64) {
        if let Some(c) = self.counts.get_mut(Self::bucket(us)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(us);
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at quantile `q` (0..=1), rounded down to its bucket; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::lower_bound(i).min(self.max);
            }
        }
        self.max
    }
}

/// What one run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EmulatorStats {
    /// Packets received from the queue (forwarded + dropped).
    pub packets: u64,
    /// Packets dropped by the rules.
    pub dropped: u64,
    /// Most packets held at once.
    pub max_held: usize,
    /// Packets released (ACCEPT).
    pub forwarded: u64,
    /// Of `packets`: decoded TCP, other protocols, undecodable.
    pub tcp: u64,
    pub non_tcp: u64,
    pub malformed: u64,
    /// Held packets released early because `stop` was set.
    pub released_early: u64,
    /// Release lateness (actual verdict time minus due time) over released packets, in us.
    pub late_p50_us: u64,
    pub late_p99_us: u64,
    pub late_max_us: u64,
    /// ENOBUFS from the socket: the kernel could not hand us packets (they were dropped).
    pub overruns: u64,
    /// Verdicts the kernel rejected, or that could not be sent.
    pub verdict_errors: u64,
    /// The kernel's own counters for this queue, read from /proc at the end (0 if unreadable):
    /// packets dropped because the queue was full, and because the socket could not take them.
    pub kernel_queue_dropped: u64,
    pub kernel_user_dropped: u64,
    /// Wall-clock time of the run and CPU time of the calling thread during it.
    pub elapsed: Duration,
    pub cpu_time: Duration,
}

impl EmulatorStats {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "packets": self.packets,
            "dropped": self.dropped,
            "forwarded": self.forwarded,
            "max_held": self.max_held,
            "tcp": self.tcp,
            "non_tcp": self.non_tcp,
            "malformed": self.malformed,
            "released_early": self.released_early,
            "late_p50_us": self.late_p50_us,
            "late_p99_us": self.late_p99_us,
            "late_max_us": self.late_max_us,
            "overruns": self.overruns,
            "verdict_errors": self.verdict_errors,
            "kernel_queue_dropped": self.kernel_queue_dropped,
            "kernel_user_dropped": self.kernel_user_dropped,
            "elapsed_us": self.elapsed.as_micros() as u64,
            "cpu_us": self.cpu_time.as_micros() as u64,
        })
    }
}
