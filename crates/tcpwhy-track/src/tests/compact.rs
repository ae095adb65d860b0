//! Connections that have seen only their client's SYNs, kept compact: they report what full ones
//! do, in bounded memory.

use super::*;

/// Traffic with many new 4-tuples whose client sends SYNs: most answered by a SYN-ACK (then
/// data and a close), some refused, some never answered and sent again (with the same or
/// another IP ID and TSval, some the same packet captured twice), some sent again with other
/// numbers or options (a new ISN, another window), some followed by the client's data or
/// reset or a stale ACK; timestamps that step back, pauses past the idle timeout, 16 SYNs
/// and more on one tuple.
fn syn_heavy_traffic(n: usize) -> Vec<(TcpSegment, At, u32)> {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut rnd = move |m: u64| rng.random_range(0..m);
    let servers = [S, (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)), 443)];
    let mut out = Vec::new();
    let mut t = 1_000 * MS;
    // Per client: its ISN, TSval, whether its SYNs carry options.
    let mut isn = [0u32; 300];
    let mut tsval = [0u32; 300];
    let mut last_id = [0u16; 300];
    for frame in 1..=n as u64 {
        t += match rnd(1000) {
            0 => 400_000 * MS,
            1..=20 => 1_000 * MS,
            _ => rnd(2 * MS as u64) as i64,
        };
        let ts = if rnd(40) == 0 { t - 3 * MS } else { t };
        let k = rnd(300) as usize;
        let cl = (
            IpAddr::V4(Ipv4Addr::new(10, 1, (k / 200) as u8, k as u8)),
            20000 + k as u16,
        );
        let sv = servers[k % 2];
        let options = |ts: u32| TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamp: Some((ts, 0)),
            ..TcpOptions::default()
        };
        let with_options = k % 3 == 0;
        let (from, flags, seq, ack, len, window) = match rnd(24) {
            // A SYN: the same again (mostly), or a new ISN.
            0..=9 => {
                if rnd(8) == 0 {
                    isn[k] = isn[k].wrapping_add(1 + rnd(1 << 24) as u32);
                }
                (cl, SYN, isn[k], 0, 0, if rnd(30) == 0 { 999 } else { 1000 })
            }
            10..=12 => (sv, SYN | ACK, 7000, isn[k].wrapping_add(1), 0, 1000),
            13 => (sv, RST | ACK, 0, isn[k].wrapping_add(1), 0, 0),
            14 => (sv, ACK, 7000, isn[k].wrapping_add(99), 0, 1000),
            15 => (cl, RST, isn[k].wrapping_add(1), 0, 0, 0),
            16..=19 => (
                cl,
                ACK | PSH,
                isn[k].wrapping_add(1),
                7001,
                rnd(300) as u32,
                1000,
            ),
            20 => (cl, FIN | ACK, isn[k].wrapping_add(1), 7001, 0, 1000),
            21 => (sv, FIN | ACK, 7001, isn[k].wrapping_add(2), 0, 1000),
            // A SYN with data (TCP Fast Open): never compact.
            22 => (cl, SYN, isn[k], 0, 20, 1000),
            _ => (cl, SYN | TcpFlags::ECE | TcpFlags::CWR, isn[k], 0, 0, 1000),
        };
        tsval[k] = tsval[k].wrapping_add(1 + rnd(3) as u32);
        // One SYN in 10 is the last one captured again (same IP ID and TSval).
        let again = flags & SYN != 0 && rnd(10) == 0;
        let ip_id = if again { last_id[k] } else { frame as u16 };
        last_id[k] = ip_id;
        let (src, dst) = if from == cl { (cl, sv) } else { (sv, cl) };
        let seg = TcpSegment {
            src: src.0,
            dst: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            seq: Seq(seq),
            ack: Seq(ack),
            flags: TcpFlags(flags),
            window,
            payload_len: len,
            options: if with_options && from == cl && flags & SYN != 0 {
                options(if again { tsval[k] - 1 } else { tsval[k] })
            } else {
                TcpOptions::default()
            },
            ip_id,
            ttl: 64,
            first_fragment: false,
        };
        out.push((
            seg,
            At::new(frame, ts),
            54 + len + if with_options { 20 } else { 0 },
        ));
    }
    // 20 SYNs on one tuple, never answered: more than a compact connection holds.
    let lone = (IpAddr::V4(Ipv4Addr::new(10, 2, 0, 1)), 30000);
    for i in 0..20u64 {
        let seg = TcpSegment {
            src: lone.0,
            dst: S.0,
            src_port: lone.1,
            dst_port: S.1,
            seq: Seq(5),
            flags: TcpFlags(SYN),
            window: 1000,
            ip_id: i as u16 + 1,
            ttl: 64,
            ..TcpSegment::EMPTY
        };
        out.push((
            seg,
            At::new(n as u64 + 1 + i, t + 1 + i as i64 * 1_000 * MS),
            54,
        ));
    }
    out
}

/// Connections that have seen only their client's SYNs are kept compact and made full when
/// anything else happens on their tuple or when they finish: the tracker must report exactly
/// what it reports with every connection full from its first packet, and hold the same timers
/// at every moment. Under the default timers, a short idle timeout (timers re-armed,
/// connections expiring while compact), and a table so small that compact connections are
/// evicted; one tracker and three sharded.
#[test]
fn compact_connections_report_what_full_ones_do() {
    let traffic = syn_heavy_traffic(40_000);
    let mut mono = i64::MIN;
    let traffic: Vec<(TcpSegment, At, u32)> = traffic
        .into_iter()
        .map(|(s, at, len)| {
            mono = mono.max(at.ts_ns);
            (s, At::new(at.frame(), mono), len)
        })
        .collect();
    let configs = [
        Config::default(),
        Config {
            idle_timeout_ns: 1_500 * MS,
            closed_linger_ns: 3_000 * MS,
            ..Config::default()
        },
        Config {
            max_connections: 40,
            ..Config::default()
        },
    ];
    for (i, cfg) in configs.into_iter().enumerate() {
        for shards in [1, 3] {
            // Both side by side: after every packet their live timers are the same.
            let mk = |compact: bool| {
                let cfg = Config {
                    compact_syns: compact,
                    ..cfg.clone()
                };
                let ts: Vec<Tracker> = (0..shards).map(|_| Tracker::new(cfg.clone())).collect();
                let sinks: Vec<Everything> = (0..shards).map(|_| Everything::default()).collect();
                (ts, sinks)
            };
            let (mut full, mut compact) = (mk(false), mk(true));
            let timers = |ts: &[Tracker]| {
                let mut all: Vec<(i64, u64)> = ts.iter().flat_map(|t| t.live_timers()).collect();
                all.sort_unstable();
                all
            };
            let mut most_compact = 0;
            for (s, at, len) in &traffic {
                let k = shard_of(flow_hash(s), shards);
                for (ts, sinks) in [&mut full, &mut compact] {
                    ts[k].segment(s, *at, *len, &mut sinks[k]);
                    for (t, sink) in ts.iter_mut().zip(sinks.iter_mut()) {
                        t.advance_to(at.ts_ns, sink);
                    }
                }
                assert_eq!(
                    timers(&compact.0),
                    timers(&full.0),
                    "config {i}, frame {}",
                    at.frame()
                );
                most_compact =
                    most_compact.max(compact.0.iter().map(|t| t.compact_connections()).sum());
            }
            assert!(full.0.iter().all(|t| t.compact_connections() == 0));
            assert!(
                most_compact > 20,
                "config {i}: {most_compact} compact at most"
            );
            let end = |(mut ts, mut sinks): (Vec<Tracker>, Vec<Everything>)| {
                for (t, sink) in ts.iter_mut().zip(sinks.iter_mut()) {
                    t.finish_all(sink);
                }
                let stats: Vec<TrackerStats> = ts.iter().map(|t| t.stats().clone()).collect();
                let mut records: Vec<(Moment, String)> =
                    sinks.iter().flat_map(|s| s.records.clone()).collect();
                records.sort_by_key(|r| r.0); // stable: a moment's records keep their order
                let segments: std::collections::BTreeMap<u64, Vec<String>> =
                    sinks.into_iter().flat_map(|s| s.segments).collect();
                (records, segments, stats)
            };
            let (full_records, full_segments, full_stats) = end(full);
            let (records, segments, stats) = end(compact);
            assert_eq!(stats, full_stats, "config {i}, {shards} shards");
            assert_eq!(
                records.len(),
                full_records.len(),
                "config {i}, {shards} shards"
            );
            for (a, b) in records.iter().zip(&full_records) {
                assert_eq!(a, b, "config {i}, {shards} shards");
            }
            assert_eq!(segments, full_segments, "config {i}, {shards} shards");
            let kinds = |want: &str| records.iter().filter(|r| r.1.contains(want)).count();
            assert!(
                kinds("IdleTimeout") > 10 && kinds("Superseded") > 10,
                "config {i}: the traffic exercises expiry and new generations"
            );
            if i == 2 {
                assert!(kinds("Evicted") > 100, "config {i}: evictions");
            }
        }
    }
}

/// 10 000 SYNs from distinct 4-tuples, each sent twice 1 s apart and never answered: all
/// compact (no slot, no detector state), all counted open; at the end each is reported as a
/// connection of two SYNs from its client, the second a SYN retransmission.
#[test]
fn a_flood_of_unanswered_syns_stays_compact() {
    let mut r = Run::new();
    let syn = |i: u32| TcpSegment {
        src: IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + i)),
        dst: S.0,
        src_port: 1024 + (i % 60_000) as u16,
        dst_port: S.1,
        seq: Seq(i.wrapping_mul(2_654_435_761)),
        flags: TcpFlags(SYN),
        window: 512,
        ip_id: i as u16,
        ttl: 64,
        ..TcpSegment::EMPTY
    };
    let done = &mut r.done;
    let mut sink = |c: &Connection| done.push(c.clone());
    for send in 0..2u32 {
        for i in 0..10_000u32 {
            r.frame += 1;
            let at = At::new(
                r.frame,
                i64::from(send) * 1_000 * MS + i64::from(i) * 10_000,
            );
            let mut s = syn(i);
            s.ip_id = s.ip_id.wrapping_add(send as u16);
            r.t.segment(&s, at, 54, &mut sink);
        }
    }
    assert_eq!(r.t.open_connections(), 10_000);
    assert_eq!(r.t.compact_connections(), 10_000);
    assert!(r.t.live_slots().is_empty());
    let done = r.finish();
    assert_eq!(done.len(), 10_000);
    for (i, c) in done.iter().enumerate() {
        assert_eq!(c.id(), i as u64 + 1, "in the order they started");
        assert_eq!((c.client.packets, c.server.packets), (2, 0));
        assert_eq!(c.client.syn_retransmits(), 1);
        assert_eq!(c.last.frame(), 10_001 + i as u64);
        assert_eq!(c.end_reason, EndReason::CaptureEnd);
        assert_eq!(c.role, RoleSource::Syn);
    }
}

/// A SYN at 0 s and again at 1 s, then capture time passes the first look (2 s: the timer
/// moves to the last SYN + the idle timeout, 301 s), then the SYN-ACK at 3 s makes the
/// compact connection full by replaying its SYNs. Replayed, the first SYN's due time (300 s)
/// is earlier than the timer: the replay must not move the timer there (when that SYN came,
/// the timer was the first look, earlier still). The same timers as a connection full from
/// its first SYN, at every step.
#[test]
fn replayed_syns_leave_the_timer_where_it_was() {
    let other = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)), 40007);
    type Step = (i64, (IpAddr, u16), (IpAddr, u16), u8, u32, u32);
    let steps: [Step; 5] = [
        (0, C, S, SYN, 1000, 0),
        (1_000, C, S, SYN, 1000, 0),
        (2_500, other, S, ACK, 5, 5),
        (3_000, S, C, SYN | ACK, 9000, 1001),
        (3_001, C, S, ACK, 1001, 9001),
    ];
    let mut runs = [false, true].map(|compact| {
        Run::with(Config {
            compact_syns: compact,
            ..Config::default()
        })
    });
    for (n, &(ms, from, to, flags, seq, ack)) in steps.iter().enumerate() {
        for r in &mut runs {
            r.seg_between(ms, from, to, flags, seq, ack, 0);
        }
        let [full, compact] = &runs;
        assert_eq!(compact.t.live_timers(), full.t.live_timers(), "step {n}");
        if n == 1 {
            assert_eq!(compact.t.compact_connections(), 1);
        }
    }
    let [_, compact] = &runs;
    assert_eq!(compact.t.compact_connections(), 0);
    // C's timer: its last packet (3.001 s) + 300 s would be later; the live one is the
    // re-armed 301 s (moved on when it runs out).
    assert!(compact.t.live_timers().contains(&(301_000 * MS, 1)));
}

/// A compact connection holds its first SYN and 15 sent again (Linux sends 7 in all, macOS
/// 11): the 17th makes it a full connection, so one that is never answered cannot grow a
/// compact record without bound. All 17 are counted either way.
#[test]
fn a_compact_connection_holds_at_most_sixteen_syns() {
    let mut r = Run::new();
    for i in 0..16 {
        r.seg(i * 1_000, C, SYN, 1000, 0, 0);
    }
    assert_eq!((r.t.compact_connections(), r.t.live_slots().len()), (1, 0));
    r.seg(16_000, C, SYN, 1000, 0, 0);
    assert_eq!((r.t.compact_connections(), r.t.live_slots().len()), (0, 1));
    let done = r.finish();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].client.syn_retransmits(), 16);
}
