//! The records of the JSON Lines output as borrowed views with one `Serialize` each: the JSON
//! printer writes them with `serde_json`, the Parquet printer serializes the same views
//! straight into its column builders (`parquet::Cells`). Adding a field here adds it to both.
//!
//! Fields are serialized in the byte order of their keys (the order `serde_json`'s sorted maps
//! gave the records before these views existed), so the JSON stays byte for byte the same.
//! docs/json-schema.md documents every field; `SCHEMA_VERSION` changes when one changes
//! meaning or disappears.

use crate::time::{digits, ms, write_rfc3339, Bytes as _};
use serde::ser::{Serialize, SerializeStruct, Serializer};
use std::fmt::Write as _;
use std::net::IpAddr;
use tcpwhy_detect::{Exchange, Finding, Stall};
use tcpwhy_track::{Close, Connection, Endpoint, Predecessor, RttStats};

pub use super::json::SCHEMA_VERSION;

/// A short string built on the stack (an address, a time): no allocation per field.
pub struct Short {
    b: [u8; 64],
    n: usize,
}

impl Short {
    pub fn new() -> Short {
        Short { b: [0; 64], n: 0 }
    }
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written (digits, punctuation, hex): always valid UTF-8.
        std::str::from_utf8(&self.b[..self.n]).unwrap_or_default()
    }
}

impl Default for Short {
    fn default() -> Short {
        Short::new()
    }
}

impl crate::time::Bytes for Short {
    fn push(&mut self, c: u8) {
        if let Some(slot) = self.b.get_mut(self.n) {
            *slot = c;
            self.n += 1;
        }
    }
    fn extend_from_slice(&mut self, s: &[u8]) {
        let end = (self.n + s.len()).min(self.b.len());
        let take = end - self.n;
        self.b[self.n..end].copy_from_slice(&s[..take]);
        self.n = end;
    }
}

impl std::fmt::Write for Short {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.n + s.len() > self.b.len() {
            return Err(std::fmt::Error);
        }
        self.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// A capture time as RFC 3339 UTC with nanoseconds.
struct Time(i64);

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut b = Short::new();
        write_rfc3339(&mut b, self.0);
        s.serialize_str(b.as_str())
    }
}

/// An address and port as `super::endpoint` spells them: `10.0.0.1:80`, `[::1]:80`.
struct Addr(IpAddr, u16);

impl Serialize for Addr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut b = Short::new();
        match self.0 {
            IpAddr::V4(_) => ip(&mut b, self.0),
            IpAddr::V6(_) => {
                b.push(b'[');
                ip(&mut b, self.0);
                b.push(b']');
            }
        }
        b.push(b':');
        digits(&mut b, u64::from(self.1), 1);
        s.serialize_str(b.as_str())
    }
}

/// `a` as `Display` spells it, written at the end of `b`; IPv4 by hand (the formatting
/// machinery for four numbers costs more than the rest of the field).
fn ip(b: &mut Short, a: IpAddr) {
    match a {
        IpAddr::V4(a) => {
            for (i, o) in a.octets().into_iter().enumerate() {
                if i > 0 {
                    b.push(b'.');
                }
                digits(b, u64::from(o), 1);
            }
        }
        // An IPv6 address is at most 45 characters: it fits.
        IpAddr::V6(a) => {
            let _ = write!(b, "{a}");
        }
    }
}

/// An address alone (`client_ip`: no string splitting in jq).
struct Ip(IpAddr);

impl Serialize for Ip {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut b = Short::new();
        ip(&mut b, self.0);
        s.serialize_str(b.as_str())
    }
}

struct CloseView(Close);

impl Serialize for CloseView {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("close", 2)?;
        o.serialize_field("by", &self.0.by().map(|s| s.name()))?;
        o.serialize_field("kind", self.0.kind())?;
        o.end()
    }
}

/// Round-trip statistics in milliseconds: min, median, max, samples (null without samples).
struct Rtt(Option<(f64, Option<f64>, f64, u32)>);

impl Rtt {
    fn of(r: &RttStats) -> Rtt {
        Rtt((r.count() > 0).then(|| (ms(r.min_ns), r.median_ns().map(ms), ms(r.max_ns), r.count())))
    }
}

impl Serialize for Rtt {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some((min, median, max, n)) = self.0 else {
            return s.serialize_none();
        };
        let mut o = s.serialize_struct("rtt", 4)?;
        o.serialize_field("max", &max)?;
        o.serialize_field("median", &median)?;
        o.serialize_field("min", &min)?;
        o.serialize_field("samples", &n)?;
        o.end()
    }
}

/// One direction of a connection (`c2s`, `s2c`): what its sender sent.
struct SideView<'a>(&'a Endpoint);

impl Serialize for SideView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut o = s.serialize_struct("side", 24)?;
        o.serialize_field("ack_rtt_ms", &Rtt::of(&e.ack_rtt))?;
        o.serialize_field("bytes", &e.frame_bytes)?;
        o.serialize_field("data_segments", &e.data_segments)?;
        o.serialize_field("duplicates", &e.duplicates())?;
        o.serialize_field("fin_frame", &e.fin.map(|a| a.frame()))?;
        o.serialize_field("isn", &e.isn().map(|s| s.0))?;
        o.serialize_field("keepalives", &e.keepalives())?;
        o.serialize_field("mss", &e.mss())?;
        o.serialize_field("out_of_order", &e.out_of_order())?;
        o.serialize_field("packets", &e.packets)?;
        o.serialize_field("payload_bytes", &e.payload_bytes())?;
        o.serialize_field("retrans_bytes", &e.retrans_bytes())?;
        o.serialize_field("retrans_segments", &e.retrans_segments())?;
        o.serialize_field("rst_frame", &e.rst().map(|a| a.frame()))?;
        o.serialize_field("sack_blocks", &e.sack_blocks())?;
        o.serialize_field("sack_permitted", &e.sack_permitted())?;
        o.serialize_field("syn_retransmits", &e.syn_retransmits())?;
        o.serialize_field("timestamps", &e.timestamps())?;
        o.serialize_field("unique_bytes", &e.unique_bytes)?;
        o.serialize_field("unseen_acked_bytes", &e.unseen_acked_bytes())?;
        o.serialize_field("window", &e.window_scaled())?;
        o.serialize_field("window_raw", &e.window_raw)?;
        o.serialize_field("window_scale", &e.window_scale())?;
        o.serialize_field("zero_windows", &e.zero_windows())?;
        o.end()
    }
}

/// The handshake's frames and times (null when the capture has neither SYN nor SYN-ACK).
struct Handshake<'a>(&'a Connection);

impl Serialize for Handshake<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let hs = &c.handshake;
        if c.syn().is_none() && hs.syn_ack.is_none() {
            return s.serialize_none();
        }
        let mut o = s.serialize_struct("handshake", 8)?;
        o.serialize_field("ack_frame", &hs.ack.map(|a| a.frame()))?;
        o.serialize_field("client_rsts", &hs.client_rsts())?;
        o.serialize_field("invalid_acks", &hs.invalid_acks())?;
        o.serialize_field("rtt_ms", &c.handshake_rtt_ns().map(ms))?;
        o.serialize_field("syn_ack_frame", &hs.syn_ack.map(|a| a.frame()))?;
        o.serialize_field("syn_ack_to_ack_ms", &c.syn_ack_to_ack_ns().map(ms))?;
        o.serialize_field("syn_frame", &c.syn().map(|a| a.frame()))?;
        o.serialize_field("syn_to_syn_ack_ms", &c.syn_to_syn_ack_ns().map(ms))?;
        o.end()
    }
}

/// The connection that last used the same 4-tuple (null if none was seen).
struct Prev<'a>(&'a Connection, Option<&'a Predecessor>);

impl Serialize for Prev<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(p) = self.1 else {
            return s.serialize_none();
        };
        let mut o = s.serialize_struct("prev", 7)?;
        o.serialize_field("client_next_seq", &p.client_next_seq.map(|s| s.0))?;
        o.serialize_field("close", &CloseView(p.close))?;
        o.serialize_field("gap_ms", &ms(self.0.first.ts_ns - p.last_ts))?;
        o.serialize_field("id", &p.id)?;
        o.serialize_field("same_client", &p.same_client)?;
        o.serialize_field("server_next_seq", &p.server_next_seq.map(|s| s.0))?;
        o.serialize_field("timestamps", &p.timestamps)?;
        o.end()
    }
}

/// A `connection` record.
pub struct ConnectionRecord<'a>(pub &'a Connection);

impl Serialize for ConnectionRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut o = s.serialize_struct("connection", 29)?;
        o.serialize_field("c2s", &SideView(&c.client))?;
        o.serialize_field("client", &Addr(c.client.addr, c.client.port))?;
        o.serialize_field("client_ip", &Ip(c.client.addr))?;
        o.serialize_field("client_port", &c.client.port)?;
        o.serialize_field("close", &CloseView(c.close()))?;
        o.serialize_field("duration_ms", &ms(c.duration_ns()))?;
        o.serialize_field("end", &Time(c.last.ts_ns))?;
        o.serialize_field("end_ns", &c.last.ts_ns)?;
        o.serialize_field("end_reason", c.end_reason.name())?;
        o.serialize_field("first_frame", &c.first.frame())?;
        o.serialize_field("handshake", &Handshake(c))?;
        o.serialize_field("id", &c.id())?;
        o.serialize_field("last_frame", &c.last.frame())?;
        o.serialize_field("packets", &c.packets())?;
        o.serialize_field("prev", &Prev(c, c.prev()))?;
        let retransmissions = c
            .client
            .retrans_segments()
            .saturating_add(c.server.retrans_segments());
        o.serialize_field("retransmissions", &retransmissions)?;
        o.serialize_field("role", c.role.name())?;
        o.serialize_field("role_inferred", &c.role.inferred())?;
        let rtt = c
            .rtt_summary()
            .map(|(min, med, max, n)| (ms(min), Some(ms(med)), ms(max), n));
        o.serialize_field("rtt_ms", &Rtt(rtt))?;
        o.serialize_field("s2c", &SideView(&c.server))?;
        o.serialize_field("server", &Addr(c.server.addr, c.server.port))?;
        o.serialize_field("server_ip", &Ip(c.server.addr))?;
        o.serialize_field("server_port", &c.server.port)?;
        o.serialize_field("start", &Time(c.first.ts_ns))?;
        o.serialize_field("start_ns", &c.first.ts_ns)?;
        o.serialize_field("type", "connection")?;
        o.serialize_field("vantage", c.vantage().name())?;
        o.serialize_field("version", &SCHEMA_VERSION)?;
        o.serialize_field("window_scaling", &c.window_scaling())?;
        o.end()
    }
}

struct ConfidenceView<'a>(&'a tcpwhy_detect::Confidence);

impl Serialize for ConfidenceView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("confidence", 2)?;
        o.serialize_field("level", self.0.level.name())?;
        o.serialize_field("reasons", &self.0.reasons)?;
        o.end()
    }
}

/// A `finding` record. A capture-wide finding concerns many connections (named in its
/// details): its connection, client and server are null.
pub struct FindingRecord<'a>(pub &'a Finding);

impl Serialize for FindingRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let f = self.0;
        let one = !f.capture_wide();
        let mut o = s.serialize_struct("finding", 21)?;
        o.serialize_field("client", &one.then_some(Addr(f.client.0, f.client.1)))?;
        o.serialize_field("client_ip", &one.then_some(Ip(f.client.0)))?;
        o.serialize_field("client_port", &one.then_some(f.client.1))?;
        o.serialize_field("confidence", &ConfidenceView(&f.confidence))?;
        o.serialize_field("connection", &one.then_some(f.connection))?;
        o.serialize_field("cost_ms", &ms(f.cost_ns.max(0)))?;
        o.serialize_field("details", &f.details)?;
        o.serialize_field("end", &Time(f.end_ns))?;
        o.serialize_field("end_ns", &f.end_ns)?;
        o.serialize_field("explanation", &f.explanation)?;
        o.serialize_field("fix", &f.fix)?;
        o.serialize_field("frames", &f.frames)?;
        o.serialize_field("id", f.id)?;
        o.serialize_field("server", &one.then_some(Addr(f.server.0, f.server.1)))?;
        o.serialize_field("server_ip", &one.then_some(Ip(f.server.0)))?;
        o.serialize_field("server_port", &one.then_some(f.server.1))?;
        o.serialize_field("start", &Time(f.start_ns))?;
        o.serialize_field("start_ns", &f.start_ns)?;
        o.serialize_field("type", "finding")?;
        o.serialize_field("version", &SCHEMA_VERSION)?;
        o.serialize_field("wireshark_filter", &f.wireshark_filter())?;
        o.end()
    }
}

struct SplitView<'a>(&'a tcpwhy_detect::Split);

impl Serialize for SplitView<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let p = self.0;
        let mut o = s.serialize_struct("split", 7)?;
        o.serialize_field("client", &ms(p.client_ns))?;
        o.serialize_field("held", &ms(p.held_ns))?;
        o.serialize_field("network", &ms(p.network_ns))?;
        o.serialize_field("retransmission", &ms(p.retransmission_ns))?;
        o.serialize_field("server", &ms(p.server_ns))?;
        o.serialize_field("transfer", &ms(p.transfer_ns))?;
        o.serialize_field("window", &ms(p.window_ns))?;
        o.end()
    }
}

/// An `exchange` record (`--exchanges`).
pub struct ExchangeRecord<'a>(pub &'a Exchange);

impl Serialize for ExchangeRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        let mut o = s.serialize_struct("exchange", 12)?;
        o.serialize_field("connection", &x.connection)?;
        o.serialize_field("end_ns", &x.end.ts_ns)?;
        let frames = [x.start.frame(), x.response_first.frame(), x.end.frame()];
        o.serialize_field("frames", &frames)?;
        o.serialize_field("index", &x.index)?;
        o.serialize_field("latency_ms", &ms(x.latency_ns))?;
        o.serialize_field("request_bytes", &x.request_bytes)?;
        o.serialize_field("response_bytes", &x.response_bytes)?;
        o.serialize_field("split_ms", &SplitView(&x.split))?;
        o.serialize_field("start", &Time(x.start.ts_ns))?;
        o.serialize_field("start_ns", &x.start.ts_ns)?;
        o.serialize_field("type", "exchange")?;
        o.serialize_field("version", &SCHEMA_VERSION)?;
        o.end()
    }
}

/// A `stall` record (`--exchanges`).
pub struct StallRecord<'a>(pub &'a Stall);

impl Serialize for StallRecord<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut o = s.serialize_struct("stall", 14)?;
        o.serialize_field("class", t.class.name())?;
        o.serialize_field("connection", &t.connection)?;
        o.serialize_field("cost_ms", &ms(t.cost_ns))?;
        o.serialize_field("end_ns", &t.end.ts_ns)?;
        o.serialize_field("frames", &[t.start.frame(), t.end.frame()])?;
        o.serialize_field("gap_ms", &ms(t.gap_ns))?;
        o.serialize_field("in_flight_bytes", &t.in_flight)?;
        o.serialize_field("receive_window", &t.window)?;
        o.serialize_field("run_bytes", &t.run_bytes)?;
        o.serialize_field("sender", t.sender.name())?;
        o.serialize_field("start", &Time(t.start.ts_ns))?;
        o.serialize_field("start_ns", &t.start.ts_ns)?;
        o.serialize_field("type", "stall")?;
        o.serialize_field("version", &SCHEMA_VERSION)?;
        o.end()
    }
}

/// One cause's totals over the run: an element of the summary's `causes` (fields in key
/// order, as above).
pub struct CauseRecord {
    pub connections: u64,
    pub cost_ms: f64,
    pub findings: u64,
    pub id: &'static str,
    pub low_confidence_findings: u64,
}

impl Serialize for CauseRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("cause", 5)?;
        o.serialize_field("connections", &self.connections)?;
        o.serialize_field("cost_ms", &self.cost_ms)?;
        o.serialize_field("findings", &self.findings)?;
        o.serialize_field("id", self.id)?;
        o.serialize_field("low_confidence_findings", &self.low_confidence_findings)?;
        o.end()
    }
}
