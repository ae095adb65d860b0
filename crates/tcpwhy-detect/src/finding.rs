//! The finding: one cause, where, what it cost, and the proof.

use std::net::IpAddr;
use tcpwhy_track::Connection;

#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// Stable kebab-case id (`syn-stale-state`, ...).
    pub id: &'static str,
    /// The connection's id; 0 for a finding about the capture as a whole (`capture_wide`).
    pub connection: u64,
    pub client: (IpAddr, u16),
    pub server: (IpAddr, u16),
    pub start_ns: i64,
    pub end_ns: i64,
    /// The latency it added, in nanoseconds (0 when it costs nothing by itself).
    pub cost_ns: i64,
    /// Evidence frames, 1-based as in Wireshark, ascending.
    pub frames: Vec<u64>,
    /// One sentence with the numbers.
    pub explanation: String,
    /// What to do about it (mostly a fixed text: no allocation per finding).
    pub fix: std::borrow::Cow<'static, str>,
    /// Cause-specific facts, typed by the detector that found it.
    pub details: Details,
    /// How sure the finding is, and why not more.
    pub confidence: Confidence,
}

/// How sure a finding is: `High` unless something about the capture makes its cause or its cost
/// less certain (the reasons say what).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Level {
    Low,
    Medium,
    #[default]
    High,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Confidence {
    pub level: Level,
    pub reasons: Vec<&'static str>,
}

impl Confidence {
    /// Lower the level to at most `level`, for `reason`.
    pub fn lower(&mut self, level: Level, reason: &'static str) {
        self.level = self.level.min(level);
        if !self.reasons.contains(&reason) {
            self.reasons.push(reason);
        }
    }
}

impl Finding {
    pub fn new(id: &'static str, c: &Connection) -> Finding {
        Finding {
            id,
            connection: c.id(),
            client: (c.client.addr, c.client.port),
            server: (c.server.addr, c.server.port),
            start_ns: c.first.ts_ns,
            end_ns: c.last.ts_ns,
            cost_ns: 0,
            frames: Vec::new(),
            explanation: String::new(),
            fix: std::borrow::Cow::Borrowed(""),
            details: Details::None,
            confidence: Confidence::default(),
        }
    }

    /// A finding about the capture as a whole (`syn-flood`, `syn-scan`): many connections,
    /// named in its details. Its `connection` is 0 (no frame is), its `client` and `server`
    /// are unspecified (0.0.0.0:0).
    pub fn capture(id: &'static str) -> Finding {
        let none = (IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
        Finding {
            id,
            connection: 0,
            client: none,
            server: none,
            start_ns: 0,
            end_ns: 0,
            cost_ns: 0,
            frames: Vec::new(),
            explanation: String::new(),
            fix: std::borrow::Cow::Borrowed(""),
            details: Details::None,
            confidence: Confidence::default(),
        }
    }

    /// It is about the capture as a whole, not one connection (`Finding::capture`).
    pub fn capture_wide(&self) -> bool {
        self.connection == 0
    }

    /// `frame.number in {12,13,14}`: paste into Wireshark's display filter (Wireshark 4
    /// separates set members with commas; 3.x took spaces, 4 rejects them).
    pub fn wireshark_filter(&self) -> String {
        let list: Vec<String> = self.frames.iter().map(u64::to_string).collect();
        format!("frame.number in {{{}}}", list.join(","))
    }
}

/// Milliseconds with 0.1 ms precision for explanations.
pub fn ms(ns: i64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// Milliseconds as a JSON number, rounded to the microsecond.
pub fn ms_f(ns: i64) -> f64 {
    (ns as f64 / 1e3).round() / 1e3
}

/// Declares `Details`: one variant per kind of finding, each holding its detector's type of
/// details (declared beside the detector), with a `From` for each and a `Serialize` that
/// writes the inner type as it is (a JSON object; `None` is `null`).
macro_rules! details {
    ($($v:ident($t:ty)),* $(,)?) => {
        /// A finding's cause-specific facts: its detector's type, or none.
        #[derive(Clone, Debug, Default, PartialEq)]
        pub enum Details {
            #[default]
            None,
            $($v($t),)*
        }

        impl serde::Serialize for Details {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match self {
                    Details::None => s.serialize_unit(),
                    $(Details::$v(d) => d.serialize(s),)*
                }
            }
        }

        $(impl From<$t> for Details {
            fn from(d: $t) -> Details {
                Details::$v(d)
            }
        })*
    };
}

use crate::detectors as d;

details! {
    AcceptQueueFull(d::accept_queue_full::AcceptQueueFullDetails),
    CaptureLoss(d::capture_loss::CaptureLossDetails),
    ClientDelay(d::client_delay::ClientDelayDetails),
    ConnectionReset(d::connection_reset::ConnectionResetDetails),
    FastRetransmit(d::fast_retransmit::FastRetransmitDetails),
    NagleDelayedAck(d::nagle_delayed_ack::NagleDelayedAckDetails),
    PathLatency(d::path_latency::PathLatencyDetails),
    QueueingDelay(d::queueing_delay::QueueingDelayDetails),
    RtoRetransmission(d::rto_retransmission::RtoRetransmissionDetails),
    RwndLimited(d::rwnd_limited::RwndLimitedDetails),
    SenderLimited(d::sender_limited::SenderLimitedDetails),
    ServerDelay(d::server_delay::ServerDelayDetails),
    SlowStartRestart(d::slow_start_restart::SlowStartRestartDetails),
    SpuriousRetransmission(d::spurious_retransmission::SpuriousRetransmissionDetails),
    SynFlood(d::syn_flood::SynFloodDetails),
    SynRefused(d::syn_refused::SynRefusedDetails),
    SynScan(d::syn_scan::SynScanDetails),
    SynStaleState(d::syn_stale_state::SynStaleStateDetails),
    SynUnanswered(d::syn_unanswered::SynUnansweredDetails),
    TfoFallback(d::tfo_fallback::TfoFallbackDetails),
    ZeroWindow(d::zero_window::ZeroWindowDetails),
}

impl Details {
    /// The side whose sending the finding is about (`"client"`, `"server"`), for the findings
    /// about one direction of a connection.
    pub fn sender(&self) -> Option<&'static str> {
        match self {
            Details::FastRetransmit(d) => Some(d.sender),
            Details::NagleDelayedAck(d) => Some(d.sender),
            Details::RtoRetransmission(d) => Some(d.sender),
            Details::RwndLimited(d) => Some(d.sender),
            Details::SenderLimited(d) => Some(d.sender),
            Details::SlowStartRestart(d) => Some(d.sender),
            Details::SpuriousRetransmission(d) => Some(d.sender),
            _ => None,
        }
    }

    /// The side whose receiving the finding is about (`zero-window`).
    pub fn receiver(&self) -> Option<&'static str> {
        match self {
            Details::ZeroWindow(d) => Some(d.receiver),
            _ => None,
        }
    }

    /// The round trip the finding was judged by, in ms, for those that name one.
    pub fn rtt_ms(&self) -> Option<f64> {
        match self {
            Details::NagleDelayedAck(d) => d.rtt_ms,
            Details::PathLatency(d) => Some(d.rtt_ms),
            Details::RwndLimited(d) => Some(d.rtt_ms),
            Details::SlowStartRestart(d) => Some(d.rtt_ms),
            Details::SpuriousRetransmission(d) => d.rtt_ms,
            _ => None,
        }
    }

    /// Every restarted burst of a `slow-start-restart` finding; none for the others.
    pub fn restarts(&self) -> &[d::slow_start_restart::RestartedBurst] {
        match self {
            Details::SlowStartRestart(d) => &d.restarts,
            _ => &[],
        }
    }
}
