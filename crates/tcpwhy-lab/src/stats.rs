//! Latency distributions as the lab reports them.

use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct Latencies {
    values: Vec<Duration>,
}

impl Latencies {
    pub fn push(&mut self, d: Duration) {
        self.values.push(d);
    }
    pub fn len(&self) -> usize {
        self.values.len()
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    /// Every sample, in the order measured.
    pub fn values(&self) -> &[Duration] {
        &self.values
    }
    pub fn extend(&mut self, other: Latencies) {
        self.values.extend(other.values);
    }
    /// Nearest-rank percentile (p in 0..=100).
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        if self.values.is_empty() {
            return None;
        }
        let mut v = self.values.clone();
        v.sort_unstable();
        let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
        Some(v[rank.clamp(1, v.len()) - 1])
    }
    pub fn p50(&self) -> Option<Duration> {
        self.percentile(50.0)
    }
    pub fn p99(&self) -> Option<Duration> {
        self.percentile(99.0)
    }
    pub fn max(&self) -> Option<Duration> {
        self.values.iter().max().copied()
    }
    pub fn count_over(&self, limit: Duration) -> usize {
        self.values.iter().filter(|d| **d > limit).count()
    }
    /// Counts per decade: <1 ms, 1-10 ms, 10-100 ms, 100 ms-1 s, >= 1 s.
    pub fn histogram(&self) -> [(&'static str, usize); 5] {
        let mut h = [
            ("<1ms", 0),
            ("1-10ms", 0),
            ("10-100ms", 0),
            ("100ms-1s", 0),
            (">=1s", 0),
        ];
        for d in &self.values {
            let ms = d.as_secs_f64() * 1e3;
            let i = match ms {
                x if x < 1.0 => 0,
                x if x < 10.0 => 1,
                x if x < 100.0 => 2,
                x if x < 1000.0 => 3,
                _ => 4,
            };
            h[i].1 += 1;
        }
        h
    }
}

pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut l = Latencies::default();
        for i in 1..=100u64 {
            l.push(Duration::from_millis(i));
        }
        assert_eq!(l.p50(), Some(Duration::from_millis(50)));
        assert_eq!(l.p99(), Some(Duration::from_millis(99)));
        assert_eq!(l.max(), Some(Duration::from_millis(100)));
        assert_eq!(l.count_over(Duration::from_millis(90)), 10);
        let h = l.histogram();
        assert_eq!(h[1].1 + h[2].1 + h[3].1, 100);
        assert_eq!(h[3].1, 1);
        assert!(Latencies::default().p50().is_none());
    }
}
