//! The two records written most (one per connection, one per exchange) written straight into
//! a buffer: the same bytes as `serde_json` printing `json::connection_json` and
//! `json::exchange_json` (keys in the sorted order of its maps; numbers and strings through
//! `serde_json`'s own writers), without building a map per record (that cost 12 us a
//! connection). Tested against the `Value` path on every fixture.

use crate::time::{digits, ms, write_rfc3339};
use serde::Serialize;
use std::io::Write as _;
use std::net::IpAddr;
use tcpwhy_track::{Close, Connection, Endpoint, RttStats};

/// One JSON object being written: `{"k":v,...}`. Keys must come in sorted order.
struct Obj<'a> {
    b: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    fn new(b: &'a mut Vec<u8>) -> Obj<'a> {
        b.push(b'{');
        Obj { b, first: true }
    }
    // Inlined, each key is a constant: its bytes are copied by a move or two, not by a call
    // to memcpy (the keys were a fifth of writing a connection record).
    #[inline(always)]
    fn key(&mut self, k: &str) -> &mut Vec<u8> {
        if !self.first {
            self.b.push(b',');
        }
        self.first = false;
        self.b.push(b'"');
        self.b.extend_from_slice(k.as_bytes());
        self.b.extend_from_slice(b"\":");
        self.b
    }
    #[inline(always)]
    fn val<T: Serialize + ?Sized>(&mut self, k: &str, v: &T) {
        let b = self.key(k);
        // Writing into a Vec cannot fail; numbers and strings as serde_json formats them.
        let _ = serde_json::to_writer(b, v);
    }
    /// `"k":"<addr>:<port>"` as `super::endpoint` spells it, without a String in between, and
    /// the two apart, under the keys `[k, k_ip, k_port]`.
    fn endpoint(&mut self, keys: [&str; 3], addr: IpAddr, port: u16) {
        let b = self.key(keys[0]);
        b.push(b'"');
        let start = b.len();
        match addr {
            IpAddr::V4(a) => {
                for (i, o) in a.octets().into_iter().enumerate() {
                    if i > 0 {
                        b.push(b'.');
                    }
                    digits(b, u64::from(o), 1);
                }
            }
            // (Rare; no character of an IPv6 address needs escaping.)
            IpAddr::V6(a) => {
                let _ = write!(b, "[{a}]");
            }
        }
        // The address as just written (an IPv6 one without its brackets).
        let ip = match addr {
            IpAddr::V4(_) => start..b.len(),
            IpAddr::V6(_) => start + 1..b.len() - 1,
        };
        b.push(b':');
        digits(b, u64::from(port), 1);
        b.push(b'"');
        // The address and the port apart too (`k_ip`, `k_port`: no string splitting in jq).
        let b = self.key(keys[1]);
        b.push(b'"');
        b.extend_from_within(ip);
        b.push(b'"');
        let b = self.key(keys[2]);
        digits(b, u64::from(port), 1);
    }
    /// `"k":"<rfc3339>"`, as `crate::time::rfc3339` spells it, without a String in between.
    fn time(&mut self, k: &str, ns: i64) {
        let b = self.key(k);
        b.push(b'"');
        write_rfc3339(b, ns);
        b.push(b'"');
    }
    fn null(&mut self, k: &str) {
        self.key(k).extend_from_slice(b"null");
    }
    fn end(self) {
        self.b.push(b'}');
    }
}

fn close(b: &mut Vec<u8>, c: Close) {
    let mut o = Obj::new(b);
    o.val("by", &c.by().map(|s| s.name()));
    o.val("kind", c.kind());
    o.end();
}

/// `{"max","median","min","samples"}` or null, as in `json::rtt_json`.
fn rtt(o: &mut Obj<'_>, k: &str, r: Option<(f64, Option<f64>, f64, u32)>) {
    let Some((min, median, max, n)) = r else {
        o.null(k);
        return;
    };
    let b = o.key(k);
    let mut r = Obj::new(b);
    r.val("max", &max);
    r.val("median", &median);
    r.val("min", &min);
    r.val("samples", &n);
    r.end();
}

fn rtt_stats(r: &RttStats) -> Option<(f64, Option<f64>, f64, u32)> {
    (r.count() > 0).then(|| (ms(r.min_ns), r.median_ns().map(ms), ms(r.max_ns), r.count()))
}

fn side(b: &mut Vec<u8>, e: &Endpoint) {
    let mut o = Obj::new(b);
    rtt(&mut o, "ack_rtt_ms", rtt_stats(&e.ack_rtt));
    o.val("bytes", &e.frame_bytes);
    o.val("data_segments", &e.data_segments);
    o.val("duplicates", &e.duplicates());
    o.val("fin_frame", &e.fin.map(|a| a.frame()));
    o.val("isn", &e.isn().map(|s| s.0));
    o.val("keepalives", &e.keepalives());
    o.val("mss", &e.mss());
    o.val("out_of_order", &e.out_of_order());
    o.val("packets", &e.packets);
    o.val("payload_bytes", &e.payload_bytes());
    o.val("retrans_bytes", &e.retrans_bytes());
    o.val("retrans_segments", &e.retrans_segments());
    o.val("rst_frame", &e.rst().map(|a| a.frame()));
    o.val("sack_blocks", &e.sack_blocks());
    o.val("sack_permitted", &e.sack_permitted());
    o.val("syn_retransmits", &e.syn_retransmits());
    o.val("timestamps", &e.timestamps());
    o.val("unique_bytes", &e.unique_bytes);
    o.val("unseen_acked_bytes", &e.unseen_acked_bytes());
    o.val("window", &e.window_scaled());
    o.val("window_raw", &e.window_raw);
    o.val("window_scale", &e.window_scale());
    o.val("zero_windows", &e.zero_windows());
    o.end();
}

/// A connection record, as `serde_json::to_writer(json::connection_json(c))` writes it.
pub fn connection(b: &mut Vec<u8>, c: &Connection, version: u32) {
    let mut o = Obj::new(b);
    side(o.key("c2s"), &c.client);
    o.endpoint(
        ["client", "client_ip", "client_port"],
        c.client.addr,
        c.client.port,
    );
    close(o.key("close"), c.close());
    o.val("duration_ms", &ms(c.duration_ns()));
    o.time("end", c.last.ts_ns);
    o.val("end_ns", &c.last.ts_ns);
    o.val("end_reason", c.end_reason.name());
    o.val("first_frame", &c.first.frame());
    let hs = &c.handshake;
    if c.syn().is_some() || hs.syn_ack.is_some() {
        let mut h = Obj::new(o.key("handshake"));
        h.val("ack_frame", &hs.ack.map(|a| a.frame()));
        h.val("client_rsts", &hs.client_rsts());
        h.val("invalid_acks", &hs.invalid_acks());
        h.val("rtt_ms", &c.handshake_rtt_ns().map(ms));
        h.val("syn_ack_frame", &hs.syn_ack.map(|a| a.frame()));
        h.val("syn_ack_to_ack_ms", &c.syn_ack_to_ack_ns().map(ms));
        h.val("syn_frame", &c.syn().map(|a| a.frame()));
        h.val("syn_to_syn_ack_ms", &c.syn_to_syn_ack_ns().map(ms));
        h.end();
    } else {
        o.null("handshake");
    }
    o.val("id", &c.id());
    o.val("last_frame", &c.last.frame());
    o.val("packets", &c.packets());
    match c.prev() {
        Some(p) => {
            let mut q = Obj::new(o.key("prev"));
            q.val("client_next_seq", &p.client_next_seq.map(|s| s.0));
            close(q.key("close"), p.close);
            q.val("gap_ms", &ms(c.first.ts_ns - p.last_ts));
            q.val("id", &p.id);
            q.val("same_client", &p.same_client);
            q.val("server_next_seq", &p.server_next_seq.map(|s| s.0));
            q.val("timestamps", &p.timestamps);
            q.end();
        }
        None => o.null("prev"),
    }
    o.val(
        "retransmissions",
        &(c.client
            .retrans_segments()
            .saturating_add(c.server.retrans_segments())),
    );
    o.val("role", c.role.name());
    o.val("role_inferred", &c.role.inferred());
    let summary = c
        .rtt_summary()
        .map(|(min, med, max, n)| (ms(min), Some(ms(med)), ms(max), n));
    rtt(&mut o, "rtt_ms", summary);
    side(o.key("s2c"), &c.server);
    o.endpoint(
        ["server", "server_ip", "server_port"],
        c.server.addr,
        c.server.port,
    );
    o.time("start", c.first.ts_ns);
    o.val("start_ns", &c.first.ts_ns);
    o.val("type", "connection");
    o.val("vantage", c.vantage().name());
    o.val("version", &version);
    o.val("window_scaling", &c.window_scaling());
    o.end();
}

/// An exchange record, as `serde_json::to_writer(json::exchange_json(x))` writes it.
pub fn exchange(b: &mut Vec<u8>, x: &tcpwhy_detect::Exchange, version: u32) {
    let s = &x.split;
    let mut o = Obj::new(b);
    o.val("connection", &x.connection);
    o.val("end_ns", &x.end.ts_ns);
    o.val(
        "frames",
        &[x.start.frame(), x.response_first.frame(), x.end.frame()],
    );
    o.val("index", &x.index);
    o.val("latency_ms", &ms(x.latency_ns));
    o.val("request_bytes", &x.request_bytes);
    o.val("response_bytes", &x.response_bytes);
    let mut p = Obj::new(o.key("split_ms"));
    p.val("client", &ms(s.client_ns));
    p.val("held", &ms(s.held_ns));
    p.val("network", &ms(s.network_ns));
    p.val("retransmission", &ms(s.retransmission_ns));
    p.val("server", &ms(s.server_ns));
    p.val("transfer", &ms(s.transfer_ns));
    p.val("window", &ms(s.window_ns));
    p.end();
    o.time("start", x.start.ts_ns);
    o.val("start_ns", &x.start.ts_ns);
    o.val("type", "exchange");
    o.val("version", &version);
    o.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::json::{connection_json, exchange_json, SCHEMA_VERSION};
    use tcpwhy_detect::{Detectors, Exchange, Finding, Output};
    use tcpwhy_track::Analyzer;

    #[derive(Default)]
    struct Keep {
        conns: Vec<Connection>,
        exchanges: Vec<Exchange>,
    }

    impl Output for Keep {
        fn finding(&mut self, _f: &Finding) {}
        fn connection(&mut self, c: &Connection) {
            self.conns.push(c.clone());
        }
        fn exchange(&mut self, x: &Exchange) {
            self.exchanges.push(x.clone());
        }
    }

    #[test]
    fn fast_records_are_the_bytes_of_the_value_records_on_every_fixture() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let mut checked = (0, 0);
        for dir in ["captures", "lab"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
                let path = e.path().to_string_lossy().to_string();
                let Ok(mut cap) = tcpwhy_capture::Capture::open(&[&path]) else {
                    continue;
                };
                let mut keep = Keep::default();
                let mut a = Analyzer::new(Default::default());
                {
                    let mut det = Detectors::new(&[], &mut keep);
                    while let Ok(Some(p)) = cap.next() {
                        a.frame(p.frame, p.ts_ns, p.link, p.data, p.orig_len, &mut det);
                    }
                    a.finish(&mut det);
                }
                for c in &keep.conns {
                    let mut b = Vec::new();
                    connection(&mut b, c, SCHEMA_VERSION);
                    let want = serde_json::to_string(&connection_json(c)).unwrap();
                    assert_eq!(String::from_utf8(b).unwrap(), want, "{path}");
                    checked.0 += 1;
                }
                for x in &keep.exchanges {
                    let mut b = Vec::new();
                    exchange(&mut b, x, SCHEMA_VERSION);
                    let want = serde_json::to_string(&exchange_json(x)).unwrap();
                    assert_eq!(String::from_utf8(b).unwrap(), want, "{path}");
                    checked.1 += 1;
                }
            }
        }
        assert!(checked.0 > 100 && checked.1 > 100, "{checked:?}");
    }
}
