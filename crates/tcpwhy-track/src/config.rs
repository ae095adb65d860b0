//! The tracker's limits and timers, documented where they are set.

/// Nanoseconds in a second and in a millisecond: the unit of every time here.
pub(crate) const SEC: i64 = 1_000_000_000;
pub(crate) const MS: i64 = 1_000_000;

/// How the tracker follows connections: its timeouts, its memory bound, the history it keeps.
#[derive(Clone, Debug)]
pub struct Config {
    /// A connection with no packet for this long is finished (Zeek's tcp_inactivity_timeout).
    pub idle_timeout_ns: i64,
    /// A closed connection is kept this long after its last packet for late ones (the last
    /// ACK, FINs sent again when it was lost: 0.2, 0.4, 0.8, 1.6 s apart).
    pub closed_linger_ns: i64,
    /// An attempt reset before its handshake completed is kept this long: the client sends the
    /// same SYN (same ISN) again after 2 jiffies (Linux >= 5.6), 1 s (RFC 6298) or 3 s (older
    /// stacks), and with backoff for as long as its SYN ladder lasts when the peer keeps
    /// answering with stale ACKs (a TIME-WAIT socket under tcp_rfc1337=1 ignores the RST: the
    /// ladder runs until TIME-WAIT ends, about 67 s). Every SYN with that ISN belongs to the
    /// same attempt: 135 s covers Linux's default ladder (tcp_syn_retries=6: the last SYN
    /// about 127 s after the first).
    pub reset_attempt_linger_ns: i64,
    /// How long the facts about a finished connection are kept for the next SYN on its 4-tuple:
    /// 300 s covers TIME-WAIT (60 s) and a full Linux ISN wrap (274.9 s).
    pub history_ns: i64,
    /// At most this many connections are tracked at once; beyond it, the least recently active
    /// are finished early (`EndReason::Evicted`). The history of finished connections kept for
    /// the next SYN on their 4-tuple is capped at the same number of entries.
    pub max_connections: usize,
    /// Keep a connection that has seen only its client's SYNs compact until anything else
    /// happens on its 4-tuple (`crate::embryo`: 112 bytes instead of 1.1 KB, what a flood of
    /// spoofed SYNs needs). Everything reported is the same either way; false (every
    /// connection full from its first packet) is for tests that check that.
    pub compact_syns: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            idle_timeout_ns: 300 * SEC,
            closed_linger_ns: 2 * SEC,
            reset_attempt_linger_ns: 135 * SEC,
            history_ns: 300 * SEC,
            max_connections: 1_000_000,
            compact_syns: true,
        }
    }
}
