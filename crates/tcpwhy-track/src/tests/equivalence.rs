//! Random traffic: the end in pieces, sharded trackers and one tracker report the same.

use super::*;

/// A deterministic stream of segments on 40 client ports to one server: handshakes, data,
/// FIN and RST closes, ports reused with new ISNs or the same SYN again, idle gaps of up to
/// 7 s (so linger and idle timers run out while other connections go on), timestamps that
/// sometimes step back.
fn random_traffic(n: usize) -> Vec<(TcpSegment, At)> {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut rnd = move |m: u64| rng.random_range(0..m);
    let mut out = Vec::new();
    let mut t = 1_000 * MS;
    let mut isn = [0u32; 40];
    for frame in 1..=n as u64 {
        t += match rnd(100) {
            0 => 7_000 * MS,
            1..=3 => 1_500 * MS,
            _ => rnd(3 * MS as u64) as i64,
        };
        let ts = if rnd(50) == 0 { t - 5 * MS } else { t };
        let port = rnd(40) as usize;
        let cl = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000 + port as u16);
        let from_client = rnd(2) == 0;
        let flags = match rnd(20) {
            0 => {
                if rnd(3) > 0 {
                    isn[port] = isn[port].wrapping_add(1 + rnd(1 << 20) as u32);
                }
                SYN
            }
            1 => SYN | ACK,
            2 => FIN | ACK,
            3 => RST,
            _ => ACK | PSH,
        };
        let (src, dst) = if from_client { (cl, S) } else { (S, cl) };
        let seg = TcpSegment {
            src: src.0,
            dst: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            seq: Seq(isn[port].wrapping_add(rnd(5000) as u32)),
            ack: Seq(rnd(5000) as u32),
            flags: TcpFlags(flags),
            window: 1000,
            payload_len: if flags == ACK | PSH {
                rnd(1400) as u32
            } else {
                0
            },
            options: TcpOptions::default(),
            ip_id: frame as u16,
            ttl: 64,
            first_fragment: false,
        };
        out.push((seg, At::new(frame, ts)));
    }
    out
}

#[test]
fn the_end_in_pieces_reports_what_the_end_at_once_does() {
    // The same traffic (its connections left open: no idle timeout within it), finished by
    // `finish_all` and by `finish_some` in pieces of 1 and of 7: the same reports in the same
    // order, and nothing left after the last piece.
    let cfg = Config {
        idle_timeout_ns: i64::MAX / 4,
        ..Config::default()
    };
    let traffic = random_traffic(3_000);
    let fed = || {
        let mut t = Tracker::new(cfg.clone());
        let mut r = Reports::default();
        for (s, at) in &traffic {
            t.segment(s, *at, 60, &mut r);
        }
        (t, r)
    };
    let (mut t, mut all) = fed();
    let open = t.open_connections();
    assert!(open >= 20, "{open} connections open at the end");
    t.finish_all(&mut all);
    assert_eq!(t.open_connections(), 0);
    for piece in [1, 7] {
        let (mut t, mut r) = fed();
        let mut calls = 0;
        while !t.finish_some(piece, &mut r) {
            calls += 1;
        }
        assert_eq!(calls + 1, open.div_ceil(piece), "pieces of {piece}");
        assert_eq!(t.open_connections(), 0);
        assert_eq!(r.out, all.out, "pieces of {piece}");
    }
}

#[test]
fn sharded_trackers_report_exactly_what_one_tracker_reports() {
    let cfg = Config {
        idle_timeout_ns: 5_000 * MS,
        ..Config::default()
    };
    let traffic = random_traffic(20_000);
    // Time never steps back for the trackers: the caller clamps it once for the capture.
    let mut mono = i64::MIN;
    let traffic: Vec<(TcpSegment, At)> = traffic
        .into_iter()
        .map(|(s, at)| {
            mono = mono.max(at.ts_ns);
            (s, At::new(at.frame(), mono))
        })
        .collect();

    let mut one = Tracker::new(cfg.clone());
    let mut r1 = Reports::default();
    for (s, at) in &traffic {
        one.segment(s, *at, 60, &mut r1);
    }
    one.finish_all(&mut r1);
    assert!(
        r1.out
            .windows(2)
            .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
        "one tracker reports in moment order"
    );
    let kinds = |want: &str| r1.out.iter().filter(|r| r.2.contains(want)).count();
    assert!(kinds("Superseded") > 50 && kinds("IdleTimeout") > 20 && kinds("Closed") > 50);
    assert!(kinds("prev Some") > 50, "predecessors from history");

    for shards in [2, 3, 7] {
        let mut trackers: Vec<Tracker> = (0..shards).map(|_| Tracker::new(cfg.clone())).collect();
        let mut reports: Vec<Reports> = (0..shards).map(|_| Reports::default()).collect();
        for (i, (s, at)) in traffic.iter().enumerate() {
            let k = shard_of(flow_hash(s), shards);
            trackers[k].segment(s, *at, 60, &mut reports[k]);
            // Every 64 packets all trackers learn where the capture is.
            if i % 64 == 63 {
                for (t, r) in trackers.iter_mut().zip(reports.iter_mut()) {
                    t.advance_to(at.ts_ns, r);
                }
            }
        }
        for (t, r) in trackers.iter_mut().zip(reports.iter_mut()) {
            t.finish_all(r);
        }
        assert!(
            reports.iter().all(|r| !r.out.is_empty()),
            "{shards} shards all used"
        );
        let mut merged: Vec<(Moment, u32, String)> =
            reports.into_iter().flat_map(|r| r.out).collect();
        merged.sort_by_key(|r| (r.0, r.1));
        assert_eq!(merged.len(), r1.out.len(), "{shards} shards");
        for (a, b) in merged.iter().zip(&r1.out) {
            assert_eq!(a, b, "{shards} shards");
        }
    }
}
