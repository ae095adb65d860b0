//! Detector tests on connections built segment by segment (transcripts at the capture point).
//! The lab captures test the same detectors on real kernel traffic (crates/tcpwhy/tests).

use super::*;
use proptest::prelude::RngExt as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use std::net::{IpAddr, Ipv4Addr};
use tcpwhy_track::{At, Config, Tracker};
use tcpwhy_wire::{Seq, TcpFlags, TcpOptions, TcpSegment};

const C: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40000);
const S: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 80);
const MS: i64 = 1_000_000;
const SYN: u8 = TcpFlags::SYN;
const ACK: u8 = TcpFlags::ACK;
const RST: u8 = TcpFlags::RST;
const PSH: u8 = TcpFlags::PSH;
const FIN: u8 = TcpFlags::FIN;

#[derive(Default)]
struct Collect {
    findings: Vec<Finding>,
    exchanges: Vec<Exchange>,
    stalls: Vec<Stall>,
    /// The last connection finished.
    last: Option<Connection>,
}
impl Output for Collect {
    fn finding(&mut self, f: &Finding) {
        self.findings.push(f.clone());
    }
    fn connection(&mut self, c: &Connection) {
        self.last = Some(c.clone());
    }
    fn exchange(&mut self, x: &Exchange) {
        self.exchanges.push(x.clone());
    }
    fn stall(&mut self, s: &Stall) {
        self.stalls.push(s.clone());
    }
}

/// (ms, from, flags, seq, ack, payload, window, sack blocks)
type Line = (
    i64,
    (IpAddr, u16),
    u8,
    u32,
    u32,
    u32,
    u16,
    &'static [(u32, u32)],
);

/// Feed the transcript through the tracker and every detector.
fn drive(lines: &[Line]) -> Collect {
    drive_without(&[], lines)
}

/// The same with the detector ids in `disabled` turned off.
fn drive_without(disabled: &[String], lines: &[Line]) -> Collect {
    drive_scaled(disabled, None, lines)
}

/// The same with `scale` as the window scale option of every SYN (RFC 7323: both sides then
/// scale their windows by it).
fn drive_scaled(disabled: &[String], scale: Option<u8>, lines: &[Line]) -> Collect {
    drive_opts(disabled, scale, false, lines)
}

/// The same, every segment carrying a Multipath TCP option when `mptcp`.
fn drive_opts(disabled: &[String], scale: Option<u8>, mptcp: bool, lines: &[Line]) -> Collect {
    drive_port(disabled, scale, mptcp, S.1, lines)
}

/// The same with the server `S` on port `server_port` instead of its own.
fn drive_port(
    disabled: &[String],
    scale: Option<u8>,
    mptcp: bool,
    server_port: u16,
    lines: &[Line],
) -> Collect {
    drive_full(disabled, scale, mptcp, server_port, [None, None], lines)
}

/// The same with `mss[0]` as the MSS option of the client's SYNs and `mss[1]` of the
/// server's.
fn drive_full(
    disabled: &[String],
    scale: Option<u8>,
    mptcp: bool,
    server_port: u16,
    mss: [Option<u16>; 2],
    lines: &[Line],
) -> Collect {
    drive_hook(disabled, scale, mptcp, server_port, mss, lines, |_, _| {})
}

/// The same with `hook(i, segment)` run on the segment of line `i` before it is fed.
fn drive_hook(
    disabled: &[String],
    scale: Option<u8>,
    mptcp: bool,
    server_port: u16,
    mss: [Option<u16>; 2],
    lines: &[Line],
    hook: impl Fn(usize, &mut TcpSegment),
) -> Collect {
    let port = |p: u16| if p == S.1 { server_port } else { p };
    let mut out = Collect::default();
    let mut det = Detectors::new(disabled, &mut out);
    let mut t = Tracker::new(Config::default());
    for (i, &(ms, from, flags, seq, ack, len, window, sack)) in lines.iter().enumerate() {
        // Every endpoint but the server talks to the server; the server answers C.
        let to = if from == S { C } else { S };
        // The number of SACK blocks and the first block's edges reach the tracker and the
        // detectors.
        let options = TcpOptions {
            sack_count: sack.len() as u8,
            sack_first: sack
                .first()
                .map_or((Seq(0), Seq(0)), |b| (Seq(b.0), Seq(b.1))),
            window_scale: scale.filter(|_| flags & SYN != 0),
            mss: mss[usize::from(from == S)].filter(|_| flags & SYN != 0),
            mptcp,
            ..TcpOptions::default()
        };
        let mut seg = TcpSegment {
            src: from.0,
            dst: to.0,
            src_port: port(from.1),
            dst_port: port(to.1),
            seq: Seq(seq),
            ack: Seq(ack),
            flags: TcpFlags(flags),
            window,
            payload_len: len,
            options,
            ip_id: 0,
            ttl: 64,
            first_fragment: false,
        };
        hook(i, &mut seg);
        t.segment(&seg, At::new(i as u64 + 1, ms * MS), 54 + len, &mut det);
    }
    t.finish_all(&mut det);
    drop(det);
    out
}

/// A finding's details as the JSON output writes them, to read by key.
trait AsJson {
    fn json(&self) -> serde_json::Value;
}

impl AsJson for Details {
    fn json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

fn run(lines: &[Line]) -> Vec<Finding> {
    drive(lines).findings
}

fn ids(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|x| x.id).collect()
}

/// The findings of `id` among `f`.
fn of_id(f: Vec<Finding>, id: &str) -> Vec<Finding> {
    f.into_iter().filter(|x| x.id == id).collect()
}

/// The one finding of `id` among `f` (the test fails unless there is exactly one).
fn one_of(f: Vec<Finding>, id: &str) -> Finding {
    let f = of_id(f, id);
    assert_eq!(ids(&f), [id], "{f:?}");
    f.into_iter().next().expect("one")
}

/// Handshake with a 10 ms RTT, ISNs 1000 (client) and 5000 (server).
const HS: [Line; 3] = [
    (0, C, SYN, 1000, 0, 0, 1000, &[]),
    (10, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
    (10, C, ACK, 1001, 5001, 0, 1000, &[]),
];

/// A handshake seen at the client: its SYN at 0, the SYN-ACK `rtt` ms later and the client's
/// ACK at once; every window `window`.
fn handshake(rtt: i64, window: u16) -> Vec<Line> {
    vec![
        (0, C, SYN, 1000, 0, 0, window, &[]),
        (rtt, S, SYN | ACK, 5000, 1001, 0, window, &[]),
        (rtt, C, ACK, 1001, 5001, 0, window, &[]),
    ]
}

fn with_hs(rest: &[Line]) -> Vec<Line> {
    HS.iter().chain(rest).copied().collect()
}

/// A second client, on another port.
const C2: (IpAddr, u16) = (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)), 40001);

#[test]
fn a_reused_slot_starts_without_the_first_syn_of_the_connection_before() {
    // The handshake detectors share the first SYN of the connection in the slot. A refused
    // attempt finishes (10 s after its reset: its client may send the SYN again), and another client's single SYN takes its slot:
    // one SYN is not an unanswered ladder (with the old SYN left over it would be two), and
    // the refusal belongs to the first connection only.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1, S, RST | ACK, 0, 1001, 0, 0, &[]),
        (15_000, C2, SYN, 7000, 0, 0, 1000, &[]),
    ]);
    assert_eq!(ids(&f), ["syn-refused"], "{f:?}");
    assert_eq!((f[0].connection, f[0].frames.as_slice()), (1, &[1, 2][..]));
}

#[test]
fn the_first_syn_is_a_bit_when_it_is_the_first_packet_and_kept_otherwise_and_release_clears_it() {
    // The tracker starts a connection at every client SYN with a new ISN, so the first SYN
    // the detectors see is the connection's first packet, and the state keeps one bit for it.
    // Should a first SYN come later (nothing makes one today), it is kept on its own: both
    // ways give the SYN back, and releasing the slot forgets it.
    let c = drive(&[(70, C, SYN, 1000, 0, 0, 1000, &[])])
        .last
        .expect("the connection");
    assert_eq!(c.first, At::new(1, 70 * MS));

    use crate::detectors::{FirstSyn, States, WHOLE};
    let mut states = States::default();
    let cs = states.get(&c);
    assert_eq!(cs.first_syn(&c), None);
    cs.set_first_syn(&c, c.first);
    assert_eq!(cs.first_syn(&c), Some(c.first));
    assert!(
        cs.extra.peek::<FirstSyn>(WHOLE).is_none(),
        "a bit, nothing allocated"
    );
    states.release(&c);
    assert_eq!(states.get(&c).first_syn(&c), None, "released");

    let later = At::new(9, 90 * MS);
    let cs = states.get(&c);
    cs.set_first_syn(&c, later);
    assert_eq!(cs.first_syn(&c), Some(later));
    // The other fields kept outside the detectors' states go with the release too (it is
    // the one place they are cleared for the slot's next connection).
    cs.exchange_has = 7;
    cs.server_delay_exchanges = 5;
    states.release(&c);
    let cs = states.get(&c);
    assert_eq!(cs.first_syn(&c), None, "released");
    assert_eq!((cs.exchange_has, cs.server_delay_exchanges), (0, 0));
}

#[test]
fn syn_refused_positive_and_negative() {
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1, S, RST | ACK, 0, 1001, 0, 0, &[]),
    ]);
    assert_eq!(ids(&f), ["syn-refused"]);
    assert_eq!(f[0].frames, [1, 2]);
    assert_eq!(f[0].cost_ns, MS);
    // A reset later in an established connection is not a refusal.
    let f = run(&with_hs(&[(20, S, RST | ACK, 5001, 1001, 0, 0, &[])]));
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn zero_window_stall_is_timed_and_open_windows_are_silent() {
    // Seen at the client (the handshake's SYN -> SYN-ACK: 10 ms to the server and back). The
    // window is zero from 12 to the update at 300 (288 ms); the server's data comes back
    // `resume` ms after the update: the stall lasts until then, at most the 10 ms the update
    // and the data take between here and the server.
    let zero = |resume: i64| {
        run(&with_hs(&[
            (11, S, ACK | PSH, 5001, 1001, 1000, 1000, &[]),
            (12, C, ACK, 1001, 6001, 0, 0, &[]), // the client stops reading
            (212, S, ACK, 6000, 1001, 0, 1000, &[]), // zero-window probe
            (300, C, ACK, 1001, 6001, 0, 500, &[]), // window update after 288 ms
            (300 + resume, S, ACK | PSH, 6001, 1001, 500, 1000, &[]),
        ]))
    };
    let f = zero(10);
    assert_eq!(ids(&f), ["zero-window"]);
    assert_eq!(f[0].cost_ns, 298 * MS);
    assert_eq!(f[0].frames, [5, 7]);
    assert_eq!(f[0].details.json()["receiver"], "client");
    // Data 1 ms after the update: no more than that. Data 500 ms later (nothing more to
    // send at once): the update's 10 ms way only.
    assert_eq!(zero(1)[0].cost_ns, 289 * MS);
    assert_eq!(zero(500)[0].cost_ns, 298 * MS);
    let f = run(&with_hs(&[
        (11, S, ACK | PSH, 5001, 1001, 1000, 1000, &[]),
        (12, C, ACK, 1001, 6001, 0, 1000, &[]),
    ]));
    assert!(f.is_empty(), "{f:?}");
}

/// The server sends 5 segments, the 2nd is lost: the client's ACK, `dupacks` duplicates of
/// it, the retransmission 1 ms later and the ACK of everything.
fn lost_second_segment(dupacks: usize) -> Vec<Line> {
    let mut lines = with_hs(&[]);
    for i in 0..5u32 {
        lines.push((11, S, ACK, 5001 + i * 100, 1001, 100, 1000, &[]));
    }
    lines.push((21, C, ACK, 1001, 5101, 0, 1000, &[]));
    for _ in 0..dupacks {
        lines.push((21, C, ACK, 1001, 5101, 0, 1000, &[]));
    }
    lines.push((22, S, ACK, 5101, 1001, 100, 1000, &[]));
    lines.push((32, C, ACK, 1001, 5501, 0, 1000, &[]));
    lines
}

#[test]
fn fast_retransmit_after_three_dupacks_rto_without() {
    let f = run(&lost_second_segment(3));
    assert_eq!(ids(&f), ["fast-retransmit"]);
    assert_eq!(f[0].cost_ns, 11 * MS);
    assert_eq!(f[0].frames, [5, 13]);
    // The same loss with no duplicate ACKs (the tail): a timeout.
    let f = run(&with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (21, C, ACK, 1001, 5001, 0, 1000, &[]),
        (230, S, ACK, 5001, 1001, 100, 1000, &[]), // RTO: 219 ms later
        (240, C, ACK, 1001, 5101, 0, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["rto-retransmission"]);
    assert_eq!(f[0].cost_ns, 219 * MS);
    assert_eq!(f[0].details.json()["tail"], 1);
}

#[test]
fn resends_after_the_receiver_closed_mid_transfer_may_have_had_no_one_waiting() {
    // tcpflow's bug2.pcap, both directions: the client's FIN comes while two segments of the
    // answer are in flight, acknowledging neither; the first is resent by the timer 219 ms
    // after it left. A client closing mid-answer is most likely abandoning it: the timeout is
    // real, the wait may be nobody's (low). Closed before the answer began (a half-close
    // after the request), the same resend is the client's wait.
    let lines = |fin_at: i64| {
        let mut l = with_hs(&[
            (fin_at, C, FIN | ACK, 1001, 5001, 0, 1000, &[]),
            (11, S, ACK, 5001, 1002, 100, 1000, &[]),
            (12, S, ACK, 5101, 1002, 100, 1000, &[]),
            (230, S, ACK, 5001, 1002, 100, 1000, &[]),
        ]);
        l.sort_by_key(|x| x.0);
        l
    };
    let f = run(&lines(15));
    let rto: Vec<&Finding> = f.iter().filter(|x| x.id == "rto-retransmission").collect();
    assert_eq!(rto.len(), 1, "{f:?}");
    assert_eq!(rto[0].cost_ns, 219 * MS);
    assert_eq!(rto[0].details.json()["receiver_closed_first"], true);
    assert_eq!(rto[0].confidence.level, Level::Low, "{:?}", rto[0]);
    assert!(
        rto[0]
            .explanation
            .contains("had closed its side 215 ms before the first resend"),
        "{}",
        rto[0].explanation
    );
    let f = run(&lines(10));
    let rto: Vec<&Finding> = f.iter().filter(|x| x.id == "rto-retransmission").collect();
    assert_eq!(rto.len(), 1, "{f:?}");
    assert_eq!(rto[0].details.json()["receiver_closed_first"], false);
    assert_eq!(rto[0].confidence.level, Level::High, "{:?}", rto[0]);
}

#[test]
fn a_resend_after_its_sender_closed_and_before_it_reset_the_answer_had_no_one_waiting() {
    // alexa-app.pcapng (nDPI), connection 2624: the client's last message goes in two
    // segments, the first is lost, the client closes (FIN) before its fast retransmit, and
    // resets the server's answer when it comes. Here: 100 bytes lost at 20 ms, 50 at 21 ms,
    // the client's FIN at 25 ms, the server's SACK of the 50 at 31 ms, the resend at 40 ms
    // (20 ms after the original), the server's ACK at 50 ms; then `end`: the server's answer
    // at 51 ms and the client's reset of it 1 ms later, or the client's ACK of it (a
    // half-close that kept reading), or no answer and the client's reset at 2 s (it gave up
    // waiting on its own timer, as skype.pcap's stream 18 does: its wait was real).
    let lines = |end: &[Line]| {
        let mut l = with_hs(&[
            (20, C, ACK, 1001, 5001, 100, 1000, &[]),
            (21, C, ACK | PSH, 1101, 5001, 50, 1000, &[]),
            (25, C, FIN | ACK, 1151, 5001, 0, 1000, &[]),
            (31, S, ACK, 5001, 1001, 0, 1000, &[(1101, 1152)]),
            (40, C, ACK, 1001, 5001, 100, 1000, &[]),
            (50, S, ACK, 5001, 1152, 0, 1000, &[]),
        ]);
        l.extend_from_slice(end);
        l
    };
    let answer: Line = (51, S, ACK | PSH, 5001, 1152, 200, 1000, &[]);
    let fr = one_of(
        run(&lines(&[answer, (52, C, RST, 1152, 0, 0, 0, &[])])),
        "fast-retransmit",
    );
    assert_eq!(fr.cost_ns, 20 * MS);
    assert_eq!(fr.details.json()["sender_closed_first"], true);
    assert_eq!(fr.confidence.level, Level::Low, "{fr:?}");
    assert!(
        fr.explanation
            .contains("closed its side 15.0 ms before the first resend"),
        "{}",
        fr.explanation
    );
    for end in [
        vec![answer, (52, C, ACK, 1152, 5201, 0, 1000, &[][..])],
        vec![(2000, C, RST, 1152, 0, 0, 0, &[][..])],
    ] {
        let fr = one_of(run(&lines(&end)), "fast-retransmit");
        assert_eq!(fr.cost_ns, 20 * MS);
        assert_eq!(fr.details.json()["sender_closed_first"], false, "{end:?}");
        assert_eq!(fr.confidence.level, Level::High, "{fr:?}");
    }
}

#[test]
fn duplicate_acks_past_a_byte_still_make_a_fast_retransmit() {
    // The duplicate-ACK count is a saturating byte: 256 of them (a wrapping count would read
    // 0, and the retransmission would look like a timeout) still mean fast recovery.
    assert_eq!(ids(&run(&lost_second_segment(256))), ["fast-retransmit"]);
}

#[test]
fn sack_counts_as_fast_recovery() {
    let mut lines = with_hs(&[]);
    for i in 0..3u32 {
        lines.push((11, S, ACK, 5001 + i * 100, 1001, 100, 1000, &[]));
    }
    lines.push((21, C, ACK, 1001, 5001, 0, 1000, &[(5101, 5301)]));
    lines.push((22, S, ACK, 5001, 1001, 100, 1000, &[]));
    assert_eq!(ids(&run(&lines)), ["fast-retransmit"]);
}

#[test]
fn capture_loss_when_acks_cover_unseen_data() {
    let f = run(&with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (12, S, ACK, 5201, 1001, 100, 1000, &[]), // 5101..5201 never captured
        (21, C, ACK, 1001, 5301, 0, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["capture-loss"]);
    assert_eq!(f[0].details.json()["server_bytes_missed"], 100);
    let f = run(&with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (21, C, ACK, 1001, 5101, 0, 1000, &[]),
    ]));
    assert!(f.is_empty());
}

#[test]
fn nagle_needs_a_late_pure_ack_and_an_immediate_release() {
    let late = |ack_ms: i64, b_ms: i64| {
        run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (ack_ms, S, ACK, 5001, 1101, 0, 1000, &[]),
            (b_ms, C, ACK | PSH, 1101, 5001, 100, 1000, &[]),
            (b_ms + 1, S, ACK | PSH, 5001, 1201, 10, 1000, &[]),
        ]))
    };
    let f = late(60, 60);
    assert_eq!(ids(&f), ["nagle-delayed-ack"]);
    assert_eq!(f[0].cost_ns, 40 * MS);
    assert_eq!(f[0].frames, [4, 5, 6]);
    // ACK on time (one RTT): no delayed ACK, nothing held.
    assert!(late(30, 30).is_empty());
    // B long after the ACK: the application wrote it late, Nagle held nothing.
    assert!(late(60, 90).is_empty());
}

#[test]
fn a_syn_sooner_than_any_timer_is_not_sent_again_for_want_of_an_answer() {
    // tcpdump's bgp-shutdown-msg-variations.pcap: three SYNs with one ISN 1.2 and 0.9 ms apart
    // (each with other data: a tool's packets), then nothing. No stack retries a SYN sooner
    // than 2 ms (TCP_TIMEOUT_MIN), so none of them is a retry: no syn-unanswered.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1, C, SYN, 1000, 0, 0, 1000, &[]),
        (2, C, SYN, 1000, 0, 0, 1000, &[]),
    ]);
    assert!(f.is_empty(), "{f:?}");
    // A retry after a second is one, counted from the SYN before it: the copy 1 ms after the
    // first is not counted, the finding lists the first SYN and the retry.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1, C, SYN, 1000, 0, 0, 1000, &[]),
        (1001, C, SYN, 1000, 0, 0, 1000, &[]),
    ]);
    assert_eq!(ids(&f), ["syn-unanswered"]);
    assert_eq!(f[0].details.json()["syns"], 2);
    assert_eq!(f[0].frames, [1, 3]);
    assert_eq!(f[0].cost_ns, 1001 * MS);
}

#[test]
fn fast_open_data_not_taken_costs_the_round_trip_until_it_goes_again() {
    // A 40 ms path seen from the client: the SYN carries a 100-byte request (Fast Open), the
    // SYN-ACK 40 ms later acknowledges only the SYN (ack = ISN + 1), and the request goes again
    // with the handshake's ACK at 40 ms: it reached the server 40 ms later than Fast Open
    // would have had it. The answer follows 40 ms after that.
    let fallback = [
        (0, C, SYN, 1000, 0, 100, 1000, &[][..]),
        (40, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (40, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (80, S, ACK | PSH, 5001, 1101, 200, 1000, &[]),
        (80, C, ACK, 1101, 5201, 0, 1000, &[]),
    ];
    let f = run(&fallback);
    assert_eq!(ids(&f), ["tfo-fallback", "path-latency"], "{f:?}");
    assert_eq!(f[0].cost_ns, 40 * MS);
    assert_eq!(f[0].frames, [1, 2, 3]);
    assert_eq!(f[0].details.json()["taken_bytes"], 0);
    // The path's own share: the handshake and the exchange from the request sent again (one
    // round trip each, 80 ms); the round trip the SYN's data waited is the fallback's alone.
    assert_eq!(
        f[1].details.json()["exchange_ms"],
        serde_json::json!([40.0])
    );
    assert_eq!(f[1].cost_ns, 80 * MS);
    // The SYN-ACK takes the data (ack = ISN + 1 + 100): Fast Open worked, nothing to name; the
    // answer comes one round trip after the SYN.
    let mut taken = fallback;
    taken[1].4 = 1101;
    taken[2] = (40, C, ACK, 1101, 5001, 0, 1000, &[]);
    let t = run(&taken);
    assert_eq!(ids(&t), ["path-latency"], "{t:?}");
    assert_eq!(
        t[0].details.json()["exchange_ms"],
        serde_json::json!([80.0])
    );
}

#[test]
fn syn_unanswered_ladder_fingerprints() {
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1000, C, SYN, 1000, 0, 0, 1000, &[]),
        (3000, C, SYN, 1000, 0, 0, 1000, &[]),
        (3010, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (3010, C, ACK, 1001, 5001, 0, 1000, &[]),
    ]);
    assert_eq!(ids(&f), ["syn-unanswered"]);
    // Answered 10 ms after the last SYN instead of 10 ms after the first: 3000 ms lost.
    assert_eq!(f[0].cost_ns, 3000 * MS);
    assert_eq!(f[0].details.json()["answer_lost"], false);
    assert_eq!(f[0].details.json()["ladder"], "doubling from 1 s");
    // Several stacks send that ladder: none is named.
    assert_eq!(f[0].details.json()["client_stack"], "unknown");
    // macOS and Linux >= 6.5 both retry 1, 1, 1, 1, 1, then 2, 4 ... s apart (cs_http_espn_fail's
    // Mac OS X 10.10 client was called Linux): shared, so unknown too.
    let mut lines: Vec<Line> = Vec::new();
    for t in [0, 1000, 2000, 3000, 4000, 5000, 7000, 11000] {
        lines.push((t, C, SYN, 1000, 0, 0, 1000, &[]));
    }
    let f = run(&lines);
    assert_eq!(
        f[0].details.json()["ladder"],
        "retries 1 s apart (then doubling after five)"
    );
    assert_eq!(f[0].details.json()["client_stack"], "unknown");
    assert_eq!(
        f[0].details.json()["stacks"],
        serde_json::json!(["Linux >= 6.5 (tcp_syn_linear_timeouts=4)", "macOS"])
    );
    // One SYN answered at once: nothing.
    assert!(run(&HS).is_empty());
}

#[test]
fn a_syn_retry_on_a_connection_closed_unused_is_low() {
    // alexa-app.pcapng 1598 (nDPI): a SYN sent again after 1 s, answered, then the client's
    // FIN without a byte either way (the app used a connection it had opened beside it).
    let lines = |request: u32| -> Vec<Line> {
        vec![
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (1000, C, SYN, 1000, 0, 0, 1000, &[]),
            (1010, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (1010, C, ACK, 1001, 5001, 0, 1000, &[]),
            (1020, C, PSH | ACK, 1001, 5001, request, 1000, &[]),
            (1030, C, FIN | ACK, 1001 + request, 5001, 0, 1000, &[]),
        ]
    };
    let f = one_of(run(&lines(0)), "syn-unanswered");
    assert_eq!(f.cost_ns, 1000 * MS);
    assert_eq!(f.confidence.level, Level::Low);
    let f = one_of(run(&lines(100)), "syn-unanswered");
    assert_eq!(f.confidence.level, Level::High);
}

#[test]
fn a_syn_ack_held_on_its_way_is_told_from_a_lost_one_by_the_echo() {
    // packetbeat's http_minitwit.pcap: SYN-ACKs sent at once and again, the client's SYN sent
    // again, and the client's ACK 1.5 s after the first SYN-ACK echoing *its* TSval: the
    // first SYN-ACK reached the client late (all arrived in one burst), it was not lost.
    // Captured at the server, 20 ms from the client: SYN and SYN-ACK (TSval 5000) at 0 ms,
    // SYN again and SYN-ACK again (TSval 6000) at 1000 ms, the client's ACK at 1500 ms echoing
    // `echo`, its request with it, answered at once and acknowledged 20 ms later (the round
    // trip). Echoing 5000: held, 1500 - 0 - 20 = 1480 ms lost. Echoing 6000: the first was
    // lost, and the last SYN-ACK answered: 1000 ms.
    let lines: [Line; 8] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1000, C, SYN, 1000, 0, 0, 1000, &[]),
        (1000, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1500, C, ACK, 1001, 5001, 0, 1000, &[]),
        (1500, C, PSH | ACK, 1001, 5001, 100, 1000, &[]),
        (1501, S, PSH | ACK, 5001, 1101, 300, 1000, &[]),
        (1521, C, ACK, 1101, 5301, 0, 1000, &[]),
    ];
    let run_echo = |echo: u32| {
        let hook = |i: usize, s: &mut TcpSegment| {
            s.options.timestamp = Some(match i {
                1 => (5000, 1),
                3 => (6000, 2),
                4 | 5 => (3, echo),
                6 => (6500, 3),
                7 => (4, 6500),
                _ => (i as u32 + 1, 0),
            });
        };
        let f = drive_hook(&[], None, false, S.1, [None, None], &lines, hook).findings;
        one_of(f, "syn-unanswered")
    };
    let f = run_echo(5000);
    assert_eq!(f.details.json()["answer_held"], true);
    assert_eq!(f.cost_ns, 1480 * MS);
    assert!(
        f.explanation.contains("reached the client late"),
        "{}",
        f.explanation
    );
    assert!(f.fix.contains("held, not dropped"), "{}", f.fix);
    assert_eq!(f.frames, [1, 2, 3, 4, 5]);
    let f = run_echo(6000);
    assert_eq!(f.details.json()["answer_held"], false);
    assert_eq!(f.details.json()["answer_lost"], true);
    assert_eq!(f.cost_ns, 1000 * MS);
}

#[test]
fn a_syn_ack_lost_on_its_way_to_the_client_is_named_and_kept_out_of_the_round_trip() {
    // Captured at the server, 20 ms from the client: the SYN-ACK of 0 ms is lost on the way,
    // the client sends its SYN again at 1000 ms, the server answers at once, and the client's
    // ACK comes 20 ms later. Without the loss the ACK would have come at 20 ms: 1000 ms lost.
    // The handshake measures no round trip (not 1020 ms): the data's ACKs tell it.
    let lost_answer: [Line; 8] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1000, C, SYN, 1000, 0, 0, 1000, &[]),
        (1000, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1020, C, ACK, 1001, 5001, 0, 1000, &[]),
        (1020, C, PSH | ACK, 1001, 5001, 100, 1000, &[]),
        (1021, S, PSH | ACK, 5001, 1101, 300, 1000, &[]),
        (1041, C, ACK, 1101, 5301, 0, 1000, &[]),
    ];
    let d = drive(&lost_answer);
    let f = one_of(d.findings.clone(), "syn-unanswered");
    assert_eq!(f.cost_ns, 1000 * MS);
    assert_eq!(f.details.json()["answer_lost"], true);
    assert_eq!(f.details.json()["syn_acks"], 2);
    assert_eq!(f.frames, [1, 2, 3, 4]);
    assert!(
        f.fix.contains("between the capture point and the client"),
        "{}",
        f.fix
    );
    assert!(of_id(d.findings.clone(), "path-latency").is_empty());
    let c = d.last.expect("the connection");
    assert_eq!(c.handshake_rtt_ns(), None);
    assert_eq!(c.syn_ack_to_ack_ns(), Some(20 * MS));

    // The server's own timer sends the SYN-ACK again at 1000 ms (the first one, or the
    // client's ACK of it, was lost); the client's ACK comes 20 ms after the second.
    let timer: [Line; 7] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1000, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1020, C, ACK, 1001, 5001, 0, 1000, &[]),
        (1020, C, PSH | ACK, 1001, 5001, 100, 1000, &[]),
        (1021, S, PSH | ACK, 5001, 1101, 300, 1000, &[]),
        (1041, C, ACK, 1101, 5301, 0, 1000, &[]),
    ];
    let d = drive(&timer);
    let f = one_of(d.findings, "syn-unanswered");
    assert_eq!(f.cost_ns, 1000 * MS);
    assert_eq!(f.details.json()["syns"], 1);
    assert_eq!(
        d.last.expect("the connection").syn_ack_to_ack_ns(),
        Some(20 * MS)
    );

    // Copies of the SYN-ACK within a fraction of a millisecond (a capture on several
    // interfaces, no IP ID to tell them apart) lost nothing.
    let copies: [Line; 5] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1, C, ACK, 1001, 5001, 0, 1000, &[]),
        (1, C, PSH | ACK, 1001, 5001, 100, 1000, &[]),
    ];
    let d = drive(&copies);
    assert!(of_id(d.findings, "syn-unanswered").is_empty());
    assert_eq!(d.last.expect("the connection").handshake_rtt_ns(), Some(MS));

    // A scanner that never completes the handshake leaves the SYN-ACKs unanswered on purpose.
    let scan: [Line; 4] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (1000, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (3000, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
    ];
    assert!(run(&scan).is_empty(), "{:?}", run(&scan));

    // The server's SYN-ACK sent again after the client's ACK is the accept queue's, not this.
    let after_ack: [Line; 4] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (10, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (10, C, ACK, 1001, 5001, 0, 1000, &[]),
        (1010, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
    ];
    assert!(of_id(run(&after_ack), "syn-unanswered").is_empty());
}

#[test]
fn a_resend_whose_ack_echoes_the_originals_timestamp_is_spurious() {
    // Captured mid-path (no vantage), every segment stamped with its send time in ms (TSval)
    // and echoing the peer's last (TSecr). The server's 100 bytes at 20 ms are sent again by
    // its timer at 420 ms; the client's ACK of them comes at 440 ms. Echoing 20 (the
    // original's stamp), it answered the original, which came late: the resend was spurious,
    // nothing lost (RFC 3522). Echoing 420, the resend filled the hole: 400 ms lost.
    let lines: [Line; 6] = [
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (5, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (10, C, ACK, 1001, 5001, 0, 1000, &[]),
        (20, S, PSH | ACK, 5001, 1001, 100, 1000, &[]),
        (420, S, PSH | ACK, 5001, 1001, 100, 1000, &[]),
        (440, C, ACK, 1001, 5101, 0, 1000, &[]),
    ];
    let run_echo = |echo: u32| {
        let stamp = |i: usize, s: &mut TcpSegment| {
            let o = &mut s.options;
            let ms = lines[i].0 as u32;
            o.timestamp = Some((ms, if i == 5 { echo } else { ms.saturating_sub(5) }));
        };
        drive_hook(&[], None, false, S.1, [None, None], &lines, stamp).findings
    };
    let f = run_echo(20);
    assert!(of_id(f.clone(), "rto-retransmission").is_empty(), "{f:?}");
    let sp = one_of(f, "spurious-retransmission");
    assert_eq!(sp.details.json()["echoed_original"], 1);
    assert_eq!(sp.cost_ns, 0);
    let f = run_echo(420);
    assert!(
        of_id(f.clone(), "spurious-retransmission").is_empty(),
        "{f:?}"
    );
    assert_eq!(one_of(f, "rto-retransmission").cost_ns, 400 * MS);
}

#[test]
fn a_slow_answer_on_a_connection_begun_before_the_capture_is_named_low() {
    // No handshake: the server is the side on port 80. A 120-byte request, the server's ACK
    // 1 ms later (its TCP had it), then a full-sized answer 201 ms after the request: 200 ms of
    // server time beyond the 1 ms round trip (tcpflow's test_loopback: godoc's 187 ms).
    let lines = |answer: u32| -> Vec<Line> {
        vec![
            (0, C, PSH | ACK, 1001, 5001, 120, 1000, &[]),
            (1, S, ACK, 5001, 1121, 0, 1000, &[]),
            (201, S, PSH | ACK, 5001, 1121, answer, 1000, &[]),
            (202, C, ACK, 1121, 5001 + answer, 0, 1000, &[]),
        ]
    };
    let f = one_of(run(&lines(1000)), "server-delay");
    assert_eq!(f.cost_ns, 200 * MS);
    assert_eq!(f.confidence.level, Level::Low);
    // A short answer (a status message, a message on the server's schedule) shows no turn.
    assert!(of_id(run(&lines(40)), "server-delay").is_empty());
}

#[test]
fn a_client_wait_within_the_relays_read_batches_is_low_confidence() {
    // webex.pcap 632 (nDPI), an Android capture app's own stack: a SYN-ACK in 4 ms without
    // the MSS option the SYN carried, the client's request ACKed in 1 ms, and the client's
    // ACK of the response 50 ms after it (the app reads the tun every 50 ms). A request 50 ms
    // after the handshake is within twice that: it can be the batches, low. 300 ms is the
    // client's own (whatsapp 235, reviewed true): high.
    let wait = |w: i64| {
        let lines: [Line; 7] = [
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (4, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (4, C, ACK, 1001, 5001, 0, 1000, &[]),
            (4 + w, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (5 + w, S, ACK, 5001, 1101, 0, 1000, &[]),
            (200 + w, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
            (250 + w, C, ACK, 1101, 5501, 0, 1000, &[]),
        ];
        let f = drive_full(&[], None, false, S.1, [Some(1460), None], &lines).findings;
        let d: Vec<&Finding> = f.iter().filter(|x| x.id == "client-delay").collect();
        assert_eq!(d.len(), 1, "{f:?}");
        d[0].confidence.level
    };
    assert_eq!(wait(50), Level::Low);
    assert_eq!(wait(300), Level::High);
}

#[test]
fn a_relay_that_acknowledges_for_the_server_makes_its_timing_low_confidence() {
    // A request, the server side's ACK `ack_ms` later, the answer at 300 ms.
    let exchange = |ack_ms: i64| -> Vec<Line> {
        vec![
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (20 + ack_ms, S, ACK, 5001, 1101, 0, 1000, &[]),
            (300, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
            (310, C, ACK, 1101, 5501, 0, 1000, &[]),
        ]
    };
    let relayed = |f: &[Finding]| {
        let d = f.iter().find(|x| x.id == "server-delay");
        d.map(|d| {
            (
                d.confidence.level,
                d.confidence.reasons.contains(&confidence::RELAY_SYN),
            )
        })
    };
    // Seen at the client (SYN-ACK 10 ms after the SYN, the handshake's ACK at once): an ACK
    // of the request 1 ms after it comes from something ten times nearer than the server. A
    // relay that answered the SYN only once its own connection was up (the handshake took
    // the server's round trip): the server's turn keeps its level.
    let c = drive(&with_hs(&exchange(1)));
    let conn = c.last.as_ref().expect("one connection");
    assert_eq!(confidence::relay(conn), Some(confidence::Relay::Acks));
    assert_eq!(
        relayed(&c.findings),
        Some((Level::High, false)),
        "{:?}",
        c.findings
    );
    // After one round trip it is the server's own stack.
    let c = drive(&with_hs(&exchange(10)));
    assert_eq!(confidence::relay(c.last.as_ref().expect("one")), None);
    assert_eq!(
        relayed(&c.findings),
        Some((Level::High, false)),
        "{:?}",
        c.findings
    );
    // The server's own ACK clock is the relay's, though: a server segment seen with the
    // client's late ACK (Nagle, by the look of it) is no confident finding. Seen 10 ms from the
    // server it left before that ACK reached the server (none); the relay's stack, which
    // sent it, is near: held there, low at most.
    let held = |ack_ms: i64| {
        let f = run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (20 + ack_ms, S, ACK, 5001, 1101, 0, 1000, &[]),
            (31, S, ACK | PSH, 5001, 1101, 100, 1000, &[]),
            (71, C, ACK, 1101, 5101, 0, 1000, &[]),
            (71, S, ACK | PSH, 5101, 1101, 10, 1000, &[]),
            (81, C, ACK, 1101, 5111, 0, 1000, &[]),
        ]));
        let n = f.iter().find(|x| x.id == "nagle-delayed-ack").cloned();
        n.map(|n| (n.details.sender(), n.confidence.level))
    };
    assert_ne!(held(1).map(|h| h.1), Some(Level::High));
    assert_eq!(held(10), None);
    // A SYN-ACK 2 ms after the SYN without the MSS option the SYN carried, and the client's
    // handshake ACK 10 ms later (the relay reads its tun in batches, so the capture looks
    // near the server): an ACK of the request in 1 ms, sooner than that SYN-ACK, is the
    // relay's.
    let bare = |server_mss: Option<u16>| {
        let mut lines: Vec<Line> = vec![
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (2, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (12, C, ACK, 1001, 5001, 0, 1000, &[]),
        ];
        lines.extend(exchange(1));
        drive_full(&[], None, false, S.1, [Some(1460), server_mss], &lines).findings
    };
    let f = bare(None);
    assert_eq!(relayed(&f), Some((Level::Low, true)), "{f:?}");
    // With the option, a server's stack this near (the capture at the server) ACKs at once.
    let f = bare(Some(1460));
    assert_eq!(relayed(&f).map(|r| r.1), Some(false), "{f:?}");
}

#[test]
fn server_data_that_does_not_acknowledge_the_request_does_not_answer_it() {
    // skype.pcap's blackouts (frames 1502-2306): the server acknowledges the first message,
    // the second is sent again and again, never acknowledged, and the server's data 5 s
    // later still acknowledges only the first (it left before the second reached it).
    let blackout = |answer_ack: u32| {
        run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (30, S, ACK, 5001, 1101, 0, 1000, &[]),
            (31, C, ACK | PSH, 1101, 5001, 60, 1000, &[]),
            (431, C, ACK | PSH, 1101, 5001, 60, 1000, &[]),
            (1231, C, ACK | PSH, 1101, 5001, 60, 1000, &[]),
            (5000, S, ACK | PSH, 5001, answer_ack, 80, 1000, &[]),
        ]))
    };
    let f = blackout(1101);
    assert!(f.iter().all(|x| x.id != "server-delay"), "{f:?}");
    // An answer that acknowledges the message: the server had it and took its time, from
    // the last copy sent (1231 ms) less the 10 ms round trip.
    let f = blackout(1161);
    let d = f
        .iter()
        .find(|x| x.id == "server-delay")
        .expect("server-delay");
    assert_eq!(d.cost_ns, (5000 - 1231 - 10) * MS);
}

#[test]
fn an_ack_too_soon_after_the_resend_at_the_sender_answers_the_original() {
    // Captured at the client (SYN-ACK 10 ms after the SYN, the handshake's ACK at once): its
    // request, resent after 240 ms, and the server's ACK of it `ack_ms` after the resend
    // (tumblr.pcap frames 2979, 3269, 3334: 8.6 ms against a 22.7 ms round trip, echoing the
    // original's TSval).
    let resent = |ack_ms: i64| {
        let f = run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (260, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (260 + ack_ms, S, ACK, 5001, 1101, 0, 1000, &[]),
        ]));
        ids(&f)
    };
    // 2 ms: no ACK of the resend comes back in less than half the 10 ms round trip.
    assert_eq!(resent(2), ["spurious-retransmission"]);
    // A round trip later it may answer the resend: a timeout, the original lost.
    assert_eq!(resent(10), ["rto-retransmission"]);
}

#[test]
fn server_delay_counts_server_time_beyond_the_round_trip() {
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (30, S, ACK, 5001, 1101, 0, 1000, &[]), // the stack ACKs after one round trip
        (300, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
        (310, C, ACK, 1101, 5501, 0, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["server-delay"]);
    // 280 ms from the request to the answer, less the 10 ms round trip to the server.
    assert_eq!(f[0].cost_ns, 270 * MS);
    assert_eq!(f[0].frames, [4, 5, 6]);
    assert_eq!(f[0].details.json()["acked_before_answer"], 1);
    // An answer within a few round trips is the network, not the server.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (45, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
    ]));
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn a_capture_miss_lowers_confidence_only_near_the_finding() {
    // The capture misses the client's second segment (1101..1201): the server's answer at
    // 30 ms acknowledges it. A slow answer (290 ms of server time) comes later, at `t`.
    let lines = |t: i64| -> Vec<Line> {
        with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (30, S, ACK | PSH, 5001, 1201, 100, 1000, &[]),
            (40, C, ACK, 1201, 5101, 0, 1000, &[]),
            (t, C, ACK | PSH, 1201, 5101, 100, 1000, &[]),
            (t + 10, S, ACK, 5101, 1301, 0, 1000, &[]),
            (t + 300, S, ACK | PSH, 5101, 1301, 500, 1000, &[]),
            (t + 310, C, ACK, 1301, 5601, 0, 1000, &[]),
        ])
    };
    let server_delay = |f: &[Finding]| {
        f.iter()
            .find(|x| x.id == "server-delay")
            .cloned()
            .unwrap_or_else(|| panic!("{f:?}"))
    };
    // 500 ms after the miss: the missed segment could be part of what was timed.
    let near = server_delay(&run(&lines(500)));
    assert_eq!(near.confidence.level, Level::Medium, "{near:?}");
    assert_eq!(near.confidence.reasons, [confidence::CAPTURE_LOSS]);
    // 20 s after it: the miss says nothing about this answer.
    let far = server_delay(&run(&lines(20_000)));
    assert_eq!(far.cost_ns, 290 * MS); // 300 ms less the 10 ms round trip
    assert_eq!(far.confidence.level, Level::High, "{far:?}");
}

#[test]
fn path_latency_on_long_round_trips_only() {
    // 80 ms RTT: handshake, then two exchanges of one round trip each.
    let lines = |rtt: i64| -> Vec<Line> {
        vec![
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (rtt, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (rtt, C, ACK, 1001, 5001, 0, 1000, &[]),
            (rtt, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (2 * rtt, S, ACK | PSH, 5001, 1101, 100, 1000, &[]),
            (2 * rtt, C, ACK | PSH, 1101, 5101, 100, 1000, &[]),
            (3 * rtt, S, ACK | PSH, 5101, 1201, 100, 1000, &[]),
        ]
    };
    let long = |rtt: i64| run(&lines(rtt));
    let f = long(80);
    assert_eq!(ids(&f), ["path-latency"]);
    assert_eq!(
        f[0].cost_ns,
        3 * 80 * MS,
        "the handshake and two one-round-trip exchanges"
    );
    assert_eq!(
        f[0].details.json()["round_trips"],
        serde_json::json!([1, 1])
    );
    assert!(
        f[0].explanation
            .contains("; 2 exchanges took 80.0 ms each (median, about 1 round trip): "),
        "{}",
        f[0].explanation
    );
    // One exchange is not a median.
    let one = run(&lines(80)[..5]);
    assert!(
        one[0]
            .explanation
            .contains("; its one exchange took 80.0 ms (about 1 round trip): "),
        "{}",
        one[0].explanation
    );
    // The same on a LAN (2 ms): nothing to say.
    assert!(long(2).is_empty());
}

#[test]
fn path_latency_counts_an_abandoned_exchange_to_the_client_giving_up() {
    // 400 ms RTT. The client sends a 517-byte request at 404 and closes 56 ms later (FIN at
    // 460); the answer (three segments, 930 to 990) comes to a socket already closed, and the
    // client resets each segment (a browser dropping a TLS handshake it no longer needs).
    // The client waited 56 ms for the answer: handshake 400 + 56 = 456 ms of path. A client
    // that only half-closed and acknowledges the answer waited the whole round trip:
    // handshake 400 + one round trip 400 = 800 ms.
    let lines = |reset: bool| -> Vec<Line> {
        let answer_ack = |t: i64, ack: u32| -> Line {
            if reset {
                (t, C, RST, 1519, 0, 0, 0, &[])
            } else {
                (t, C, ACK, 1519, ack, 0, 65535, &[])
            }
        };
        vec![
            (0, C, SYN, 1000, 0, 0, 65535, &[]),
            (400, S, SYN | ACK, 5000, 1001, 0, 65535, &[]),
            (400, C, ACK, 1001, 5001, 0, 65535, &[]),
            (404, C, ACK | PSH, 1001, 5001, 517, 65535, &[]),
            (460, C, ACK | FIN, 1518, 5001, 0, 65535, &[]),
            (924, S, ACK, 5001, 1518, 0, 65535, &[]),
            (930, S, ACK, 5001, 1519, 1388, 65535, &[]),
            answer_ack(931, 6389),
            (936, S, ACK, 6389, 1519, 1388, 65535, &[]),
            answer_ack(937, 7777),
            (990, S, ACK | PSH, 7777, 1519, 93, 65535, &[]),
            answer_ack(991, 7870),
        ]
    };
    let path = |f: Vec<Finding>| -> Finding {
        let mut p: Vec<Finding> = f.into_iter().filter(|x| x.id == "path-latency").collect();
        assert_eq!(p.len(), 1, "{p:?}");
        p.remove(0)
    };
    let gave_up = path(run(&lines(true)));
    assert_eq!(gave_up.cost_ns, 456 * MS, "{gave_up:?}");
    assert!(
        gave_up
            .explanation
            .contains("the client stopped waiting for the answer 56.0 ms after its request"),
        "{}",
        gave_up.explanation
    );
    let waited = path(run(&lines(false)));
    assert_eq!(waited.cost_ns, 800 * MS, "{waited:?}");
    assert!(
        !waited.explanation.contains("stopped waiting"),
        "{}",
        waited.explanation
    );
}

#[test]
fn path_latency_counts_no_more_round_trips_than_the_segments_need() {
    // 80 ms RTT (no MSS option: segments of up to 1460 bytes count one each). Request A is
    // one segment; the server's TCP acknowledges it at once (160) and its answer, one
    // segment, leaves 160 ms after that ACK (320): three round trips at the capture point,
    // but one segment each way crosses the path in one, and the other two were the server
    // application's. Request B, 1 s later, is acknowledged at once too and answered 50 ms
    // after its ACK by nine 1460-byte segments in three flights (2, 3, 4) a round trip apart:
    // slow start from a 2-segment window needs all three.
    let mut lines: Vec<Line> = vec![
        (0, C, SYN, 1000, 0, 0, 65535, &[]),
        (80, S, SYN | ACK, 5000, 1001, 0, 65535, &[]),
        (80, C, ACK, 1001, 5001, 0, 65535, &[]),
        (80, C, ACK | PSH, 1001, 5001, 100, 65535, &[]),
        (160, S, ACK, 5001, 1101, 0, 65535, &[]),
        (320, S, ACK | PSH, 5001, 1101, 100, 65535, &[]),
        (1320, C, ACK | PSH, 1101, 5101, 100, 65535, &[]),
        (1400, S, ACK, 5101, 1201, 0, 65535, &[]),
    ];
    let mut seq = 5101;
    for (flight, n) in [(0, 2), (1, 3), (2, 4)] {
        for _ in 0..n {
            lines.push((1450 + 80 * flight, S, ACK, seq, 1201, 1460, 65535, &[]));
            seq += 1460;
        }
    }
    let f = run(&lines);
    let p: Vec<&Finding> = f.iter().filter(|x| x.id == "path-latency").collect();
    assert_eq!(p.len(), 1, "{f:?}");
    assert_eq!(
        p[0].details.json()["round_trips"],
        serde_json::json!([1, 3]),
        "{:?}",
        p[0]
    );
    assert_eq!(
        p[0].cost_ns,
        (80 + 80 + 240) * MS,
        "the handshake, 1 and 3 round trips"
    );
    assert!(
        p[0].explanation.contains(
            "; 1 of them, answered well after the server's TCP acknowledged the request, counts only the round trips its segments need: "
        ),
        "{}",
        p[0].explanation
    );
    // A alone: its one exchange, one round trip of it the path's.
    let one = run(&lines[..6]);
    let p: Vec<&Finding> = one.iter().filter(|x| x.id == "path-latency").collect();
    assert_eq!(p.len(), 1, "{one:?}");
    assert_eq!(p[0].cost_ns, 160 * MS);
    assert!(
        p[0].explanation.contains(
            "its one exchange took 240 ms, 1 round trip of it the path's (the server's TCP acknowledged the request well before the answer began"
        ),
        "{}",
        p[0].explanation
    );
    // A without the server's ACK: the capture cannot tell the server's time from delay on
    // the path, and the three round trips count.
    let mut no_ack = lines[..6].to_vec();
    no_ack.remove(4);
    let p: Vec<Finding> = run(&no_ack)
        .into_iter()
        .filter(|x| x.id == "path-latency")
        .collect();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].cost_ns, (80 + 240) * MS);
    // A with TCP timestamps (line i stamped 1000 + i): its answer stamped with the ACK's
    // TSval left the server in the same tick as the ACK and came late through the network,
    // which is the path's; stamped 160 ticks later, it left 160 ms after it.
    let stamped = |answer_tsval: u32| {
        let hook = |i: usize, s: &mut TcpSegment| {
            let o = &mut s.options;
            let v = if i == 5 {
                answer_tsval
            } else {
                1000 + i as u32
            };
            o.timestamp = Some((v, 0));
        };
        let f = drive_hook(&[], None, false, S.1, [None, None], &lines[..6], hook).findings;
        let p: Vec<Finding> = f.into_iter().filter(|x| x.id == "path-latency").collect();
        assert_eq!(p.len(), 1);
        p[0].cost_ns
    };
    assert_eq!(stamped(1004), (80 + 240) * MS);
    assert_eq!(stamped(1164), (80 + 80) * MS);
    // A in two segments, the second held until the server's ACK of the first came (Nagle):
    // sent as that ACK arrived (160), acknowledged at 240 and answered 110 ms later (350).
    // Two of its round trips were waits for ACKs: the path's.
    let nagle: Vec<Line> = vec![
        lines[0],
        lines[1],
        lines[2],
        (80, C, ACK | PSH, 1001, 5001, 100, 65535, &[]),
        (160, S, ACK, 5001, 1101, 0, 65535, &[]),
        (160, C, ACK | PSH, 1101, 5001, 100, 65535, &[]),
        (240, S, ACK, 5001, 1201, 0, 65535, &[]),
        (350, S, ACK | PSH, 5001, 1201, 100, 65535, &[]),
    ];
    let p: Vec<Finding> = run(&nagle)
        .into_iter()
        .filter(|x| x.id == "path-latency")
        .collect();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].details.json()["round_trips"], serde_json::json!([2]));
    assert_eq!(p[0].cost_ns, (80 + 160) * MS);
    // A answered 30 ms after the ACK (less than half the round trip): not the server's, as
    // far as the capture can tell.
    let mut soon = lines[..6].to_vec();
    soon[4].0 = 290;
    let p: Vec<Finding> = run(&soon)
        .into_iter()
        .filter(|x| x.id == "path-latency")
        .collect();
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].cost_ns, (80 + 240) * MS);
}

#[test]
fn path_latency_keeps_the_first_64_exchanges() {
    // 70 exchanges of one 80 ms round trip each (the n-th takes n ms more, to tell them
    // apart): the details list the first 64, the first exchange's own latency first, and
    // count all 70. The six beyond the list (144..149 ms) cost at most the listed median's
    // one round trip each: 6 x 80 ms more than the same connection cut after 64 exchanges.
    let lines_for = |count: u32| {
        let mut lines: Vec<Line> = HS
            .iter()
            .map(|l| (l.0 * 8, l.1, l.2, l.3, l.4, l.5, l.6, l.7))
            .collect();
        for n in 0..count {
            let t = 80 + i64::from(n) * 200;
            let (c, s) = (1001 + n * 100, 5001 + n * 100);
            lines.push((t, C, ACK | PSH, c, s, 100, 1000, &[]));
            lines.push((
                t + 80 + i64::from(n),
                S,
                ACK | PSH,
                s,
                c + 100,
                100,
                1000,
                &[],
            ));
        }
        lines
    };
    let f = run(&lines_for(70));
    assert_eq!(ids(&f), ["path-latency"], "{f:?}");
    let ms: Vec<f64> = (0..64).map(|n| 80.0 + f64::from(n)).collect();
    assert_eq!(f[0].details.json()["exchange_ms"], serde_json::json!(ms));
    assert_eq!(f[0].details.json()["exchanges"], 70);
    assert!(
        f[0].explanation
            .contains("; 70 exchanges, the first 64 of them took "),
        "{}",
        f[0].explanation
    );
    let cut = run(&lines_for(64));
    assert_eq!(cut[0].details.json()["exchanges"], 64);
    assert_eq!(f[0].cost_ns - cut[0].cost_ns, 6 * 80 * MS);
    assert_eq!(f[0].details.json()["unlisted_exchanges"], 6);
    // 144 + 145 + ... + 149 ms, priced 6 x 80 ms.
    assert_eq!(f[0].details.json()["unlisted_ms"], 879.0);
    assert_eq!(f[0].details.json()["unlisted_cost_ms"], 480.0);
}

#[test]
fn client_delay_after_the_handshake_but_not_when_the_server_speaks_first() {
    let f = run(&with_hs(&[
        (210, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (220, S, ACK | PSH, 5001, 1101, 100, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["client-delay"]);
    assert_eq!(f[0].cost_ns, 200 * MS);
    assert_eq!(f[0].frames, [3, 4]);
    // A server greeting first (SMTP, MySQL): the client answers it, no client delay.
    let f = run(&with_hs(&[
        (200, S, ACK | PSH, 5001, 1001, 50, 1000, &[]),
        (201, C, ACK | PSH, 1001, 5051, 100, 1000, &[]),
    ]));
    assert!(f.iter().all(|x| x.id != "client-delay"), "{f:?}");
}

#[test]
fn rwnd_limited_when_the_sender_waits_at_the_window_edge() {
    // The client advertises 3000 bytes; the server fills it each round trip, then waits.
    let mut lines = with_hs(&[(10, C, ACK, 1001, 5001, 0, 3000, &[])]);
    let mut seq = 5001u32;
    for round in 0..4i64 {
        let t = 20 + round * 10;
        for _ in 0..3 {
            lines.push((t, S, ACK, seq, 1001, 1000, 1000, &[]));
            seq += 1000;
        }
        lines.push((t + 10, C, ACK, 1001, seq, 0, 3000, &[]));
    }
    let f = run(&lines);
    assert_eq!(ids(&f), ["rwnd-limited"]);
    assert_eq!(f[0].details.json()["waits"], 3);
    assert_eq!(f[0].details.json()["max_window_bytes"], 3000);
    assert_eq!(f[0].cost_ns, 3 * 10 * MS);
    // A window far larger than what is sent: never full, nothing to say.
    let mut lines = with_hs(&[(10, C, ACK, 1001, 5001, 0, 60000, &[])]);
    let mut seq = 5001u32;
    for round in 0..4i64 {
        lines.push((20 + round * 10, S, ACK, seq, 1001, 1000, 1000, &[]));
        seq += 1000;
        lines.push((30 + round * 10, C, ACK, 1001, seq, 0, 60000, &[]));
    }
    assert!(run(&lines).is_empty());
}

fn exchanges(lines: &[Line]) -> Vec<Exchange> {
    drive(lines).exchanges
}

#[test]
fn exchange_latency_splits_into_parts_that_add_up() {
    // Near the client, 10 ms RTT. Request in two pieces with a Nagle hold of 40 ms; the
    // server thinks 100 ms; the response's second segment waits 200 ms for a retransmission.
    let x = exchanges(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 50, 1000, &[]),
        (60, S, ACK, 5001, 1051, 0, 1000, &[]), // delayed ACK, 40 ms
        (60, C, ACK | PSH, 1051, 5001, 50, 1000, &[]), // the held piece, at once
        (170, S, ACK | PSH, 5001, 1101, 1000, 1000, &[]), // 110 ms: 10 network + 100 server
        (171, S, ACK | PSH, 6001, 1101, 500, 1000, &[]),
        (380, S, ACK | PSH, 6001, 1101, 500, 1000, &[]), // retransmitted after 209 ms
        (390, C, ACK, 1101, 6501, 0, 1000, &[]),
    ]));
    assert_eq!(x.len(), 1);
    let s = x[0].split;
    assert_eq!(x[0].latency_ns, 360 * MS);
    assert_eq!(s.held_ns, 40 * MS);
    assert_eq!(s.client_ns, 0);
    assert_eq!(s.network_ns, 10 * MS);
    assert_eq!(s.server_ns, 100 * MS);
    assert_eq!(s.retransmission_ns, 209 * MS);
    assert_eq!(s.transfer_ns, MS);
    let sum = s.client_ns
        + s.network_ns
        + s.server_ns
        + s.retransmission_ns
        + s.window_ns
        + s.held_ns
        + s.transfer_ns;
    assert_eq!(sum, x[0].latency_ns);
    assert_eq!((x[0].request_bytes, x[0].response_bytes), (100, 1500));
}

#[test]
fn server_greeting_is_not_a_response_and_each_request_starts_an_exchange() {
    let x = exchanges(&with_hs(&[
        (11, S, ACK | PSH, 5001, 1001, 20, 1000, &[]), // greeting
        (12, C, ACK | PSH, 1001, 5021, 10, 1000, &[]),
        (23, S, ACK | PSH, 5021, 1011, 10, 1000, &[]),
        (30, C, ACK | PSH, 1011, 5031, 10, 1000, &[]),
        (41, S, ACK | PSH, 5031, 1021, 10, 1000, &[]),
    ]));
    assert_eq!(x.len(), 2);
    assert_eq!(x[0].latency_ns, 11 * MS);
    assert_eq!(x[1].index, 2);
}

#[test]
fn one_retransmission_detector_serves_two_ids_disabled_one_by_one() {
    // A fast retransmit (three duplicate ACKs) and a timeout (the tail, no duplicates).
    let mut lines = with_hs(&[]);
    for i in 0..5u32 {
        lines.push((11, S, ACK, 5001 + i * 100, 1001, 100, 1000, &[]));
    }
    for _ in 0..4 {
        lines.push((21, C, ACK, 1001, 5101, 0, 1000, &[]));
    }
    lines.push((22, S, ACK, 5101, 1001, 100, 1000, &[])); // fast retransmit
    lines.push((32, C, ACK, 1001, 5501, 0, 1000, &[]));
    lines.push((33, S, ACK, 5501, 1001, 100, 1000, &[]));
    lines.push((260, S, ACK, 5501, 1001, 100, 1000, &[])); // RTO of the tail
    let all = |off: &[&str]| {
        let off: Vec<String> = off.iter().map(|s| s.to_string()).collect();
        let mut v = ids(&drive_without(&off, &lines).findings);
        v.sort_unstable();
        v
    };
    assert_eq!(all(&[]), ["fast-retransmit", "rto-retransmission"]);
    assert_eq!(all(&["rto-retransmission"]), ["fast-retransmit"]);
    assert_eq!(all(&["fast-retransmit"]), ["rto-retransmission"]);
    assert!(all(&["fast-retransmit", "rto-retransmission"]).is_empty());
}

fn stalls(lines: &[Line]) -> Vec<(StallClass, i64, u64)> {
    drive(&with_hs(lines))
        .stalls
        .iter()
        .map(|s| (s.class, s.gap_ns / MS, s.in_flight))
        .collect()
}

#[test]
fn stalls_in_a_transfer_are_classified() {
    // The server streams (no request): 3 segments, ACKed, then nothing in flight for 479 ms.
    let st = stalls(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (11, S, ACK, 5101, 1001, 100, 1000, &[]),
        (11, S, ACK, 5201, 1001, 100, 1000, &[]),
        (21, C, ACK, 1001, 5301, 0, 1000, &[]),
        (500, S, ACK, 5301, 1001, 100, 1000, &[]),
        (510, C, ACK, 1001, 5401, 0, 1000, &[]),
    ]);
    assert_eq!(st, [(StallClass::SenderLimited, 479, 0)]);
    // 600 bytes in flight, window open, no retransmission: the ACK comes 289 ms late.
    // (The client first opens its window wide: 600 bytes would fill most of 1000.)
    let mut lines: Vec<Line> = vec![(10, C, ACK, 1001, 5001, 0, 60000, &[])];
    lines.extend((0..6u32).map(|i| (11, S, ACK, 5001 + i * 100, 1001, 100, 1000, &[][..])));
    lines.push((300, C, ACK, 1001, 5601, 0, 1000, &[]));
    assert_eq!(stalls(&lines), [(StallClass::AckDelay, 289, 600)]);
    // One small segment in flight released by a late ACK: a delayed ACK.
    let st = stalls(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (51, C, ACK, 1001, 5101, 0, 1000, &[]),
    ]);
    assert_eq!(st, [(StallClass::DelayedAck, 40, 100)]);
    // In flight, the ACK never comes, the segment is sent again 219 ms later.
    let st = stalls(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (21, C, ACK, 1001, 5001, 0, 1000, &[]),
        (230, S, ACK, 5001, 1001, 100, 1000, &[]),
        (240, C, ACK, 1001, 5101, 0, 1000, &[]),
    ]);
    assert_eq!(st, [(StallClass::Retransmission, 219, 100)]);
    // The client closes its window; the server resumes 289 ms after the last progress, when
    // the window opens again (the probe in between is not progress).
    let st = stalls(&[
        (11, S, ACK | PSH, 5001, 1001, 1000, 1000, &[]),
        (12, C, ACK, 1001, 6001, 0, 0, &[]),
        (212, S, ACK, 6000, 1001, 0, 1000, &[]),
        (300, C, ACK, 1001, 6001, 0, 500, &[]),
        (301, S, ACK | PSH, 6001, 1001, 500, 1000, &[]),
    ]);
    assert_eq!(st, [(StallClass::ZeroWindow, 289, 0)]);
    // 1000 bytes in flight fill the client's 1000-byte window; its ACK comes 200 ms later.
    let st = stalls(&[
        (11, S, ACK, 5001, 1001, 500, 1000, &[]),
        (11, S, ACK, 5501, 1001, 500, 1000, &[]),
        (211, C, ACK, 1001, 6001, 0, 1000, &[]),
    ]);
    assert_eq!(st, [(StallClass::ReceiveWindow, 200, 1000)]);
}

#[test]
fn no_stall_in_a_healthy_transfer_or_across_request_and_response() {
    // ACK-clocked bulk transfer, one round trip (10 ms) per flight.
    let mut lines: Vec<Line> = Vec::new();
    for r in 0..20u32 {
        let t = 11 + 10 * i64::from(r);
        for i in 0..4u32 {
            lines.push((t, S, ACK, 5001 + (r * 4 + i) * 100, 1001, 100, 1000, &[]));
        }
        lines.push((t + 10, C, ACK, 1001, 5001 + (r + 1) * 400, 0, 1000, &[]));
    }
    assert_eq!(stalls(&lines), []);
    // The server thinks 500 ms before answering: its time (server-delay), not a stall.
    let st = stalls(&[
        (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 0, 1000, &[]),
        (521, S, ACK | PSH, 5001, 1101, 100, 1000, &[]),
        (531, C, ACK, 1101, 5101, 0, 1000, &[]),
        (1531, C, ACK | PSH, 1101, 5101, 100, 1000, &[]), // the next request, 1 s later
        (1541, S, ACK | PSH, 5101, 1201, 100, 1000, &[]),
    ]);
    assert_eq!(st, []);
}

#[test]
fn a_pause_whose_data_echoes_an_older_ack_is_no_sender_limit() {
    // `sender_limited_only_for_pauses_inside_an_answer`'s answer, every segment stamped with
    // its time in ms (TSval). The client's ACK at 31 acknowledges all 1000 bytes; the server's
    // data 500 ms later echoes either that ACK's stamp (31: the sender had it, nothing in
    // flight, and sent nothing: its application) or the request's (11: that ACK had not
    // reached the sender, whose 1000 bytes were still in flight to it; the capture sits near
    // the client of a path whose queue held the ACK: nDPI's ookla.pcap, frames 3312-3314).
    let lines = with_hs(&[
        (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 1000, 1000, &[]),
        (31, C, ACK, 1101, 6001, 0, 1000, &[]),
        (531, S, ACK | PSH, 6001, 1101, 100, 1000, &[]),
        (541, C, ACK, 1101, 6101, 0, 1000, &[]),
    ]);
    let run_echo = |echo: u32| {
        let stamp = |i: usize, s: &mut TcpSegment| {
            let ecr = match i {
                0 => 0,
                6 => echo,
                _ => lines[i - 1].0 as u32,
            };
            s.options.timestamp = Some((lines[i].0 as u32 + 1, ecr));
        };
        drive_hook(&[], None, false, S.1, [None, None], &lines, stamp).findings
    };
    assert_eq!(ids(&run_echo(32)), ["sender-limited"]);
    let f = run_echo(12);
    assert!(!ids(&f).contains(&"sender-limited"), "{f:?}");
}

#[test]
fn sender_limited_only_for_pauses_inside_an_answer() {
    // A request, then a response that stops after its first 1000 bytes (more than a segment:
    // without an MSS option, 536 bytes) with everything acknowledged for 500 ms.
    let answer: &[Line] = &[
        (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 1000, 1000, &[]),
        (31, C, ACK, 1101, 6001, 0, 1000, &[]),
        (531, S, ACK | PSH, 6001, 1101, 100, 1000, &[]),
        (541, C, ACK, 1101, 6101, 0, 1000, &[]),
    ];
    let f = run(&with_hs(answer));
    assert_eq!(ids(&f), ["sender-limited"]);
    // From the ACK that left nothing in flight (frame 6) to the resumed data (7), less the RTT.
    assert_eq!(f[0].frames, [6, 7]);
    assert_eq!(f[0].cost_ns, 490 * MS);
    assert_eq!(f[0].details.json()["sender"], "server");
    assert_eq!(f[0].confidence.level, Level::High);
    // The same pause in a stream the server sends on its own (no request): not checked.
    let f = run(&with_hs(&[
        (21, S, ACK, 5001, 1001, 100, 1000, &[]),
        (31, C, ACK, 1001, 5101, 0, 1000, &[]),
        (531, S, ACK | PSH, 5101, 1001, 100, 1000, &[]),
        (541, C, ACK, 1001, 5201, 0, 1000, &[]),
    ]));
    assert!(f.is_empty(), "{f:?}");
    // A pause of 40 ms (30 beyond the round trip): below the 50 ms floor.
    let mut short = with_hs(answer);
    short[6].0 = 71;
    short[7].0 = 81;
    assert!(run(&short).is_empty());
    // After a retransmission the sender's pacing may hold the data: left to the loss findings.
    let f = run(&with_hs(&[
        (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 1000, 1000, &[]),
        (22, S, ACK, 5001, 1101, 1000, 1000, &[]), // sent again
        (31, C, ACK, 1101, 6001, 0, 1000, &[]),
        (531, S, ACK | PSH, 6001, 1101, 100, 1000, &[]),
        (541, C, ACK, 1101, 6101, 0, 1000, &[]),
    ]));
    assert!(!ids(&f).contains(&"sender-limited"), "{f:?}");
    // A reply line (100 bytes, less than a segment), then the next line 500 ms later: the end
    // of a message and the next (an FTP '150 Opening', then '226 Complete'), not a pause.
    let mut lines = with_hs(answer);
    lines[4].5 = 100;
    lines[5].4 = 5101;
    lines[6].3 = 5101;
    lines[7].4 = 5201;
    assert!(run(&lines).is_empty(), "{:?}", run(&lines));
    // A window below one segment (400 bytes, the MSS unknown: 536) when the sender stops: the
    // receiver's pace, not the sender's (cs_inconsistent_printer's 628-byte windows).
    let mut small = with_hs(answer);
    small[5].6 = 400;
    assert!(
        !ids(&run(&small)).contains(&"sender-limited"),
        "{:?}",
        run(&small)
    );
}

#[test]
fn a_pause_is_named_when_it_stands_out_of_the_senders_cadence() {
    // sf23_3_IOT_noTLS's shape: after a request, the client uploads 1000 bytes every 100 ms
    // (its cadence: 5 pauses of 90 ms beyond... of 100 ms each), then waits 1200 ms before the
    // last piece. The median pause is 100 ms; only the 1200 ms one (12 times it) is named,
    // costing 1200 - 10 (the round trip) = 1190 ms. SF20_Trace3's shape, a stream whose every
    // pause is alike, names none.
    let lines = |gaps: &[i64]| -> Vec<Line> {
        let mut l = with_hs(&[(11, S, ACK | PSH, 5001, 1001, 100, 1000, &[])]);
        let (mut t, mut seq) = (20i64, 1001u32);
        for g in gaps {
            l.push((t, C, ACK, seq, 5101, 1000, 1000, &[]));
            seq += 1000;
            l.push((t + 1, S, ACK, 5101, seq, 0, 1000, &[]));
            t += g;
        }
        l.push((t, C, ACK | PSH, seq, 5101, 1000, 1000, &[]));
        l
    };
    let f = run(&lines(&[100, 100, 100, 100, 100, 1200]));
    assert_eq!(ids(&f), ["sender-limited"], "{f:?}");
    assert_eq!(f[0].details.json()["pauses"], 1);
    assert_eq!(f[0].details.json()["all_pauses"], 6);
    // The client's pause: its data may be its own next messages, low confidence (the
    // server's pause in `sender_limited_only_for_pauses_inside_an_answer` stays high).
    assert_eq!(f[0].confidence.level, Level::Low);
    assert_eq!(f[0].details.json()["median_pause_ms"], 99.0);
    assert_eq!(f[0].cost_ns, 1189 * MS);
    let f = run(&lines(&[400, 500, 600, 450, 550, 620]));
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn a_message_smaller_than_a_segment_after_a_second_is_the_next_message() {
    // tor.pcap 4 (nDPI): 2344 bytes of cells, every byte acknowledged, 2.5 s of nothing, then
    // one 586-byte cell (a segment here is 1460 bytes; 536 without an MSS option, as below):
    // the relay's next cell, not the rest of an answer. Resuming with a full segment is.
    let resume = |len: u32| {
        run(&with_hs(&[
            (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (21, S, ACK, 5001, 1101, 1000, 1000, &[]),
            (31, C, ACK, 1101, 6001, 0, 1000, &[]),
            (2531, S, ACK | PSH, 6001, 1101, len, 1000, &[]),
            (2541, C, ACK, 1101, 6001 + len, 0, 1000, &[]),
        ]))
    };
    assert!(!ids(&resume(500)).contains(&"sender-limited"));
    assert_eq!(ids(&resume(536)), ["sender-limited"]);
}

#[test]
fn per_connection_state_size() {
    // Every detector's state for one connection lives in one ConnState (issue 7's memory
    // budget is about 1 KB per open connection plus the tracker's Connection): print it.
    let size = std::mem::size_of::<crate::ConnState>();
    eprintln!("size_of::<ConnState>() = {size}");
    crate::detectors::print_sizes();
    // 632 bytes, 8 of an entry's 640 free: the exchange model reads what each side had
    // acknowledged before a segment from the tracker (`SegmentEvent::acked_before`).
    // 640 bytes: slow-start-restart's flags sit in the padding after syn-unanswered's byte,
    // and when a sender last retransmitted (stall model) or filled the receiver's window
    // (rwnd-limited) are parts of `Extra`; 640 bytes since the stall model's flags are bits of a byte and its last length 16
    // bits, and nagle-delayed-ack and rwnd-limited keep both directions in one state (each
    // direction's state was padded by 4 bytes); 672 since the client's first SYN is a bit
    // when it is the connection's first packet (nearly always), and the exchange model's
    // flags and server-delay's exchange count sit in the padding after syn-unanswered's byte;
    // 704 since the parts few connections need (what detectors found, a stale ACK, a
    // refusal, SYNs sent again, retransmissions, zero windows, pauses, an exchange's lost
    // time, the exchanges after the first, a burst after idle) sit behind one pointer per
    // connection (`Extra`) instead of one each or a list inline, and the duplicate-ACK count
    // is a byte; 896 since the handshake detectors shared the first SYN, slow-start-restart
    // folded flights as they close and sequence numbers and windows that may be unknown
    // carried a flag rather than an Option (1272 before; 1888 before what detectors found was
    // boxed and time-only fields became Ts): a state grown inline shows here. An entry of
    // `States` is 10 cache lines up to 640 bytes.
    assert!(size <= 640, "{size}");
}

#[test]
fn a_resend_long_after_the_duplicate_acks_is_a_timeout_and_so_is_backoff() {
    // sf20_SF20_Trace3's shape: three duplicate ACKs at 21 ms, then silence, and the resend
    // only 2 s later (10 ms round trip): the retransmission timer, not the ACK clock, sent it.
    let mut lines = lost_second_segment(3);
    let resend = lines.len() - 2;
    lines[resend].0 = 2_021;
    lines.last_mut().unwrap().0 = 2_031;
    let f = run(&lines);
    assert_eq!(ids(&f), ["rto-retransmission"], "{f:?}");
    assert_eq!(f[0].cost_ns, 2_010 * MS, "from the original at 11 ms");
    // A fast retransmit (1 ms after the third duplicate) that is itself lost: sent again after
    // 220 and 440 ms more. The first resend is fast, the two after it are timeouts (backoff).
    let mut lines = lost_second_segment(3);
    lines.pop(); // the ACK of everything: the fast resend was lost too
    lines.push((242, S, ACK, 5101, 1001, 100, 1000, &[]));
    lines.push((682, S, ACK, 5101, 1001, 100, 1000, &[]));
    lines.push((692, C, ACK, 1001, 5501, 0, 1000, &[]));
    let f = run(&lines);
    assert_eq!(ids(&f), ["fast-retransmit", "rto-retransmission"], "{f:?}");
    assert_eq!(f[0].cost_ns, 11 * MS);
    assert_eq!(f[1].details.json()["retransmissions"], 2);
    assert_eq!(f[1].details.json()["max_backoff"], 1);
    assert_eq!(
        f[1].details.json()["waits_ms"],
        serde_json::json!([220.0, 440.0])
    );
    assert_eq!(
        f[1].cost_ns,
        (682 - 22) * MS,
        "from the fast resend on: the two findings add up to the 671 ms the segment took"
    );
}

#[test]
fn a_resend_of_data_the_receiver_had_is_spurious_not_loss() {
    // Acknowledged before the resend: the timer fired while the ACK was on its way.
    let f = run(&with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (220, C, ACK, 1001, 5101, 0, 1000, &[]),
        (221, S, ACK, 5001, 1001, 100, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["spurious-retransmission"], "{f:?}");
    assert_eq!(f[0].cost_ns, 0);
    assert_eq!(f[0].details.json()["dsack"], 0);
    // Resent before any ACK; the receiver's D-SACK (a first block below its cumulative ACK)
    // then says it got the data twice.
    let f = run(&with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (230, S, ACK, 5001, 1001, 100, 1000, &[]),
        (231, C, ACK, 1001, 5101, 0, 1000, &[]),
        (240, C, ACK, 1001, 5101, 0, 1000, &[(5001, 5101)]),
    ]));
    assert_eq!(ids(&f), ["spurious-retransmission"], "{f:?}");
    assert_eq!(f[0].details.json()["dsack"], 1);
    assert_eq!(f[0].frames, [4, 5]);
    // The same without the D-SACK: a timeout.
    let f = run(&with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (230, S, ACK, 5001, 1001, 100, 1000, &[]),
        (240, C, ACK, 1001, 5101, 0, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["rto-retransmission"], "{f:?}");
}

#[test]
fn fast_open_data_sent_again_after_the_syn_ack_ignored_it_is_not_loss() {
    // The SYN carries 50 bytes; the SYN-ACK acknowledges only the SYN (ISN + 1): the client
    // sends the 50 bytes again after the handshake, as TCP Fast Open falls back (RFC 7413).
    let f = run(&[
        (0, C, SYN, 1000, 0, 50, 1000, &[]),
        (10, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (10, C, ACK | PSH, 1001, 5001, 50, 1000, &[]),
        (20, S, ACK | PSH, 5001, 1051, 100, 1000, &[]),
        (21, C, ACK, 1051, 5101, 0, 1000, &[]),
    ]);
    assert_eq!(ids(&f), ["tfo-fallback"], "no loss finding: {f:?}");
}

#[test]
fn a_hole_filled_after_duplicate_acks_is_a_loss_before_the_capture_point() {
    // Captured at the receiver: the server's second segment (5101..5201) never reaches the
    // capture point; the client's duplicate ACKs go out at once and the resend arrives a
    // round trip (10 ms) after the third: fast retransmit of a segment lost upstream.
    let mut lines = with_hs(&[]);
    for seq in [5001u32, 5201, 5301, 5401] {
        lines.push((11, S, ACK, seq, 1001, 100, 1000, &[]));
        lines.push((11, C, ACK, 1001, 5101, 0, 1000, &[]));
    }
    lines.push((21, S, ACK, 5101, 1001, 100, 1000, &[]));
    lines.push((21, C, ACK, 1001, 5501, 0, 1000, &[]));
    let f = run(&lines);
    assert_eq!(ids(&f), ["fast-retransmit"], "{f:?}");
    assert_eq!(f[0].cost_ns, 10 * MS, "from the hole, seen at 11 ms");
    // Reordering: the missing segment comes within the same millisecond.
    let mut lines = with_hs(&[]);
    lines.push((11, S, ACK, 5001, 1001, 100, 1000, &[]));
    lines.push((11, S, ACK, 5201, 1001, 100, 1000, &[]));
    lines.push((11, S, ACK, 5101, 1001, 100, 1000, &[]));
    lines.push((12, C, ACK, 1001, 5301, 0, 1000, &[]));
    assert!(run(&lines).is_empty());
}

/// A server response of `flights` (ms after `t0`, segments of 1000 bytes) from sequence `seq`,
/// each flight acknowledged at once by the client (captured near the client: the ACK leaves
/// as the flight arrives). The window is open (65535 bytes, no scaling). Returns the next
/// sequence.
fn response(lines: &mut Vec<Line>, t0: i64, seq: u32, ack: u32, flights: &[(i64, u32)]) -> u32 {
    let mut seq = seq;
    for &(at, n) in flights {
        for _ in 0..n {
            lines.push((t0 + at, S, ACK, seq, ack, 1000, 65535, &[]));
            seq += 1000;
        }
        lines.push((t0 + at, C, ACK, ack, seq, 0, 65535, &[]));
    }
    seq
}

/// Two 150 kB responses, the second after `idle` ms of silence, each sent in slow start as
/// 10, 20, 40 and 80 segments one 50 ms round trip apart (the second restarted if
/// `restarted`, else in one flight).
fn two_responses(idle: i64, restarted: bool) -> Vec<Line> {
    let mut l = handshake(50, 65535);
    l.push((60, C, ACK | PSH, 1001, 5001, 100, 65535, &[]));
    let slow = [(0, 10), (50, 20), (100, 40), (150, 80)];
    let seq = response(&mut l, 110, 5001, 1101, &slow);
    let t = 260 + idle;
    l.push((t, C, ACK | PSH, 1101, seq, 100, 65535, &[]));
    let again = if restarted {
        &slow[..]
    } else {
        &[(0, 150)][..]
    };
    response(&mut l, t + 50, seq, 1201, again);
    l
}

#[test]
fn slow_start_restart_is_priced_in_time_against_the_window_reached() {
    // Worked out from the packets: the first response ends still doubling (80 segments in its
    // last round trip, 40 in the one before), so the window it reached is the bytes it
    // acknowledged in slow start plus its first flight, 150 + 10 = 160 kB, or twice its
    // largest round trip, 160 kB. The second 150 kB burst, after 3 s idle, starts again from
    // 10 kB and takes 150 ms (first to last segment). With 160 kB it needs one round trip,
    // and its bytes at the densest rate seen (80 kB in one quarter-round-trip bin of 12.5 ms):
    // 150 * 12.5 / 80 = 23.4375 ms. Cost 150 - 23.4375 = 126.5625 ms.
    // Windows scaled by 16 (1 MB open): the receiver does not hold the burst.
    let run = |l: &[Line]| drive_scaled(&[], Some(4), l).findings;
    let f = run(&two_responses(3_000, true));
    assert_eq!(ids(&f), ["slow-start-restart"], "{f:?}");
    let Details::SlowStartRestart(d) = &f[0].details else {
        panic!("{f:?}")
    };
    assert_eq!(d.first_flight_bytes, 10_000);
    assert_eq!(d.window_before_bytes, 160_000);
    assert_eq!(d.burst_bytes, 150_000);
    assert_eq!(d.took_ms, 150.0);
    assert_eq!(d.would_take_ms, 23.438);
    assert_eq!(f[0].cost_ns, 126_562_500);
    // The same window kept across the gap (one flight of 150 segments): no restart (the
    // 50 ms path is named, path-latency).
    let restarts = |l: &[Line]| {
        run(l)
            .iter()
            .filter(|f| f.id == "slow-start-restart")
            .count()
    };
    assert_eq!(restarts(&two_responses(3_000, false)), 0);
    // A gap shorter than the RTO (RTT + 200 ms): not idle, not a restart (the sender would
    // not have restarted; here the shape says the application paced it).
    assert_eq!(restarts(&two_responses(200, true)), 0);
    // A receiver advertising 16 kB (less than twice the 10 kB first flight): its window, not
    // a restart, made the first flight small.
    let small: Vec<Line> = two_responses(3_000, true)
        .into_iter()
        .map(|mut l| {
            if l.1 == C {
                l.6 = 1000;
            }
            l
        })
        .collect();
    assert_eq!(restarts(&small), 0);
    // A receiver advertising 40 kB when the burst begins (twice the first flight: it does
    // not hold it) and 1 MB once the first flight is in (its buffer grows as data comes, as
    // Linux's does): a kept window would have gone through as well, so the burst is priced
    // against the 160 kB kept, as above (the lab's slow-start-after-idle: the client's window
    // at the first burst varies from run to run, 262 kB to over 1 MB; priced against the
    // window at the start, its cost read 351-558 ms for the same 2 x 250 ms lost).
    let growing: Vec<Line> = two_responses(3_000, true)
        .into_iter()
        .map(|mut l| {
            if l.1 == C && l.0 > 260 && l.0 < 3_360 {
                l.6 = 2_500;
            }
            l
        })
        .collect();
    let f: Vec<Finding> = run(&growing)
        .into_iter()
        .filter(|f| f.id == "slow-start-restart")
        .collect();
    assert_eq!(ids(&f), ["slow-start-restart"], "{f:?}");
    assert_eq!(f[0].cost_ns, 126_562_500);
}

#[test]
fn request_response_turns_after_idle_are_not_flights_of_one_burst() {
    // HTTP keep-alive after idle (cs_http_dvwa_clearlogin's shape): four requests, each
    // answered by 1-4 segments one round trip later. Each response is its own burst, and none
    // is larger than its first flight: no restart, however the turns line up.
    let mut l = handshake(3, 65535);
    let (mut cseq, mut sseq, mut t) = (1001u32, 5001u32, 10i64);
    for (i, n) in [7u32, 1, 2, 1, 1, 4].into_iter().enumerate() {
        if i == 1 {
            t += 3_700; // idle
        }
        l.push((t, C, ACK | PSH, cseq, sseq, 300, 65535, &[]));
        cseq += 300;
        sseq = response(&mut l, t + 3, sseq, cseq, &[(0, n)]);
        t += 6;
    }
    assert!(run(&l).is_empty(), "{:?}", run(&l));
}

#[test]
fn a_reply_on_someones_timer_is_not_the_server_working() {
    // A 300-byte request answered by 1200 bytes 500 ms later: the server's time. Each request
    // starts a turn after 2 s of quiet (a person or a timer could have started it).
    let after_quiet = |t0: i64, req: u32, resp: u32, after: i64| -> Vec<Finding> {
        run(&with_hs(&[
            (t0, C, ACK | PSH, 1001, 5001, req, 1000, &[]),
            (t0 + 1, S, ACK, 5001, 1001 + req, 0, 1000, &[]),
            (t0 + after, S, ACK | PSH, 5001, 1001 + req, resp, 1000, &[]),
            (
                t0 + 10 + after,
                C,
                ACK,
                1001 + req,
                5001 + resp,
                0,
                1000,
                &[],
            ),
        ]))
        .into_iter()
        .filter(|f| f.id == "server-delay")
        .collect()
    };
    let reply = |req: u32, resp: u32, after: i64| after_quiet(2_010, req, resp, after);
    let f = reply(300, 1200, 500);
    assert_eq!(ids(&f), ["server-delay"], "{f:?}");
    assert_eq!(
        f[0].cost_ns,
        490 * MS,
        "less the 10 ms round trip from the capture point (near the client) to the server"
    );
    // A typed line (21 bytes) answered by another (9 bytes) 4.9 s later (zeek_irc-dcc-send's
    // DCC chat): a person, not the server.
    assert!(reply(21, 9, 4_900).is_empty());
    // The same short messages 390 ms apart (sf23_3_IOT_noTLS: 4 bytes, then 8): the device
    // answering, counted.
    assert_eq!(ids(&reply(4, 8, 390)), ["server-delay"]);
    // 53 bytes answered by 53 bytes 960 ms later (sf23_5_LocalCtrl_nodly_fail: both sides'
    // heartbeats on their own timers, crossing): not an answer.
    assert!(reply(53, 53, 960).is_empty());
    // A one-byte request sent right after the handshake, answered 3 s later by one byte (the
    // lab's syn-backlog-full-fixed: the server accept()s late): a machine asked, the server
    // was slow. Named.
    assert_eq!(ids(&after_quiet(20, 1, 1, 3_000)), ["server-delay"]);
}

#[test]
fn a_withheld_greeting_is_server_time_and_a_late_first_line_is_nobodys() {
    // SMTP (server port 25): the handshake completes and the server greets 800 ms later
    // (the client's 20-byte EHLO follows at once).
    let s25 = (S.0, 25);
    let mut out = Collect::default();
    {
        let mut det = Detectors::new(&[], &mut out);
        let mut t = Tracker::new(Config::default());
        let lines: [(i64, bool, u8, u32, u32, u32); 5] = [
            (0, true, SYN, 1000, 0, 0),
            (10, false, SYN | ACK, 5000, 1001, 0),
            (10, true, ACK, 1001, 5001, 0),
            (810, false, ACK | PSH, 5001, 1001, 40),
            (811, true, ACK | PSH, 1001, 5041, 20),
        ];
        for (i, &(ms, client, flags, seq, ack, len)) in lines.iter().enumerate() {
            let (from, to) = if client { (C, s25) } else { (s25, C) };
            let s = TcpSegment {
                src: from.0,
                dst: to.0,
                src_port: from.1,
                dst_port: to.1,
                seq: Seq(seq),
                ack: Seq(ack),
                flags: TcpFlags(flags),
                window: 1000,
                payload_len: len,
                options: TcpOptions::default(),
                ip_id: 0,
                ttl: 64,
                first_fragment: false,
            };
            t.segment(&s, At::new(i as u64 + 1, ms * MS), 54 + len, &mut det);
        }
        t.finish_all(&mut det);
    }
    let f = out.findings;
    assert_eq!(ids(&f), ["server-delay"], "{f:?}");
    assert_eq!(
        f[0].cost_ns,
        790 * MS,
        "less the 10 ms round trip to the server"
    );
    assert_eq!(f[0].frames, [3, 4]);
    // A client whose first line (20 bytes) comes 2 s after the handshake: a person typing or a
    // pre-opened connection, nobody waiting. 300 ms: the client's own time, named.
    let first = |after: i64, len: u32| {
        run(&with_hs(&[
            (10 + after, C, ACK | PSH, 1001, 5001, len, 1000, &[]),
            (11 + after, S, ACK | PSH, 5001, 1001 + len, 10, 1000, &[]),
        ]))
    };
    assert!(first(2_000, 20).is_empty());
    assert_eq!(ids(&first(300, 20)), ["client-delay"]);
}

#[test]
fn data_answering_the_peers_new_data_was_not_held_by_nagle() {
    // The server's small reply (76 bytes), the client's ACK 49.5 ms later, the client's next
    // request 0.1 ms after that and the server's answer to it (zeek_smb_smb3_multichannel,
    // frames 1004, 1030, 1031, 1032): the answer followed the new request, not the ACK.
    // Captured at the server (its SYN-ACK at once, the client's ACK 10 ms later).
    let mut lines: Vec<Line> = vec![
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (10, C, ACK, 1001, 5001, 0, 1000, &[]),
        (20, C, ACK | PSH, 1001, 5001, 204, 1000, &[]),
        (21, S, ACK | PSH, 5001, 1205, 76, 1000, &[]),
        (70, C, ACK, 1205, 5077, 0, 1000, &[]),
        (70, C, ACK | PSH, 1205, 5077, 117, 1000, &[]),
        (71, S, ACK, 5077, 1322, 100, 1000, &[]),
    ];
    assert!(run(&lines).is_empty(), "{:?}", run(&lines));
    // Without the new request in between the server's next segment was held: named.
    lines.remove(6);
    lines[6].4 = 1205;
    assert_eq!(ids(&run(&lines)), ["nagle-delayed-ack"]);
}

#[test]
fn refusals_cost_from_the_first_syn_to_the_last_reset() {
    // cs_nowebaccess2's shape: the same SYN refused three times over 1 s.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1, S, RST | ACK, 0, 1001, 0, 0, &[]),
        (500, C, SYN, 1000, 0, 0, 1000, &[]),
        (501, S, RST | ACK, 0, 1001, 0, 0, &[]),
        (1000, C, SYN, 1000, 0, 0, 1000, &[]),
        (1001, S, RST | ACK, 0, 1001, 0, 0, &[]),
    ]);
    assert_eq!(ids(&f), ["syn-refused"], "{f:?}");
    assert_eq!(f[0].cost_ns, 1001 * MS);
    assert_eq!(f[0].details.json()["refusals"], 3);
    assert_eq!(f[0].frames, [1, 2, 6]);
}

#[test]
fn a_round_trip_of_seconds_is_named_even_behind_a_long_transfer() {
    // 3.4 s round trip (sv_tcp-rst-unacked-stream's path): one request answered by a transfer
    // lasting 60 s (17 round trips: not "one to three"). Named: the handshake and one round
    // trip for the exchange, 6.8 s.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (3_400, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (3_400, C, ACK, 1001, 5001, 0, 1000, &[]),
        (3_401, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (6_800, S, ACK, 5001, 1101, 1000, 1000, &[]),
        (63_401, S, ACK | PSH, 6001, 1101, 1000, 1000, &[]),
    ]);
    let p: Vec<&Finding> = f.iter().filter(|x| x.id == "path-latency").collect();
    assert_eq!(p.len(), 1, "{f:?}");
    assert_eq!(p[0].cost_ns, 2 * 3_400 * MS);
}

#[test]
fn a_gap_the_capture_lost_is_nobodys_pause() {
    // A response whose data, 500 ms after everything seen was acknowledged, resumes beyond a
    // stretch the capture never saw (6001..7001 missing): the sender was sending, the capture
    // missed it. No sender-limited pause (a capture-loss finding says so instead).
    let f = run(&with_hs(&[
        (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 1000, 1000, &[]),
        (31, C, ACK, 1101, 6001, 0, 1000, &[]),
        (531, S, ACK | PSH, 7001, 1101, 100, 1000, &[]),
        (541, C, ACK, 1101, 7101, 0, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["capture-loss"], "{f:?}");
    // The same with an ACK for the unseen bytes ending the gap.
    let f = run(&with_hs(&[
        (11, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 1000, 1000, &[]),
        (31, C, ACK, 1101, 6001, 0, 1000, &[]),
        (531, C, ACK, 1101, 7001, 0, 1000, &[]),
        (541, S, ACK | PSH, 7001, 1101, 100, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["capture-loss"], "{f:?}");
}

#[test]
fn a_reset_with_another_ttl_than_its_senders_packets_is_named_as_a_path_devices() {
    // skype_no_unknown.pcap (nDPI), stream 1611: the server's stack acknowledges the request
    // with TTL 54, and 640 ms later a reset in the server's name arrives with TTL 245 (a SYN
    // proxy in front of it: 255 - 10 hops, against the server's 64 - 10). Here: the request
    // at 20 ms, the server's ACK at 21 ms with TTL `ack_ttl`, the reset at 520 ms with TTL
    // `rst_ttl`.
    let reset = |ack_ttl: u8, rst_ttl: u8| {
        let lines = with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (21, S, ACK, 5001, 1101, 0, 1000, &[]),
            (520, S, RST | ACK, 5001, 1101, 0, 0, &[]),
        ]);
        let hook = |i: usize, s: &mut TcpSegment| {
            s.ttl = match i {
                4 => ack_ttl,
                5 => rst_ttl,
                _ => 64,
            };
        };
        let f = drive_hook(&[], None, false, S.1, [None, None], &lines, hook).findings;
        one_of(f, "connection-reset")
    };
    let f = reset(54, 245);
    // The same time lost as from the server itself: the request's 500 ms.
    assert_eq!(f.cost_ns, 500 * MS);
    let d = f.details.json();
    assert_eq!(d["path_device"], true);
    assert_eq!(
        (d["reset_ttl"].clone(), d["sender_ttl"].clone()),
        (245.into(), 54.into())
    );
    assert!(
        f.explanation
            .starts_with("a device on the path reset the connection in the name of the server"),
        "{}",
        f.explanation
    );
    assert!(f
        .explanation
        .contains("TTL 245, the server's own packets with 54"));
    // 255 - 245 = 10 hops, 64 - 54 = 10 hops: at the server's distance.
    assert!(
        f.fix
            .contains("TTL 245 (a stack starting at 255: 10 hops away)"),
        "{}",
        f.fix
    );
    assert!(f.fix.contains("with 54 (64: 10 hops)"), "{}", f.fix);
    assert!(f.fix.contains("in front of it"), "{}", f.fix);
    // 255 - 244 = 11 hops against 64 - 55 = 9 (skype_no_unknown.pcap's 1348): another
    // device, whose place the TTLs do not tell.
    let f = reset(55, 244);
    assert_eq!(f.details.json()["path_device"], true);
    assert!(f.fix.contains("proxy sent it; find"), "{}", f.fix);
    // A nearer device with the same initial TTL: 60 (4 hops) against the server's 54 (10).
    let f = reset(54, 60);
    assert_eq!(f.details.json()["path_device"], true);
    assert!(
        f.fix.contains("about 4 hops from the capture point"),
        "{}",
        f.fix
    );
    // A route that changed by a hop or three: the server's own reset.
    for rst_ttl in [51, 55, 57] {
        let f = reset(54, rst_ttl);
        assert_eq!(f.details.json()["path_device"], false, "TTL {rst_ttl}");
        assert!(
            f.explanation.starts_with("the server ("),
            "{}",
            f.explanation
        );
    }
}

#[test]
fn a_reset_with_a_request_open_is_named_and_an_idle_one_is_not() {
    // The client's request at 20 ms, the server ACKs it and resets the connection 500 ms
    // later without answering: the request never completed, 500 ms spent on it.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 0, 1000, &[]),
        (520, S, RST | ACK, 5001, 1101, 0, 0, &[]),
    ]));
    assert_eq!(ids(&f), ["connection-reset"], "{f:?}");
    assert_eq!(f[0].cost_ns, 500 * MS);
    assert_eq!(f[0].frames, [4, 6]);
    assert_eq!(f[0].details.json()["reset_by"], "server");
    assert_eq!(f[0].details.json()["request_open"], true);
    // The same request answered and acknowledged, then the client resets the idle connection
    // (as browsers do after use): a close, not a finding.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (30, S, ACK | PSH, 5001, 1101, 200, 1000, &[]),
        (31, C, ACK, 1101, 5201, 0, 1000, &[]),
        (5_000, C, RST | ACK, 1101, 5201, 0, 0, &[]),
    ]));
    assert!(f.is_empty(), "{f:?}");
    // A reset answering the server's FIN (sent with its last 31 bytes, unacknowledged when
    // the client, gone, resets): the server had finished; not an abort of work.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (30, S, ACK | PSH | TcpFlags::FIN, 5001, 1101, 31, 1000, &[]),
        (40, C, RST, 1101, 0, 0, 0, &[]),
    ]));
    assert!(!ids(&f).contains(&"connection-reset"), "{f:?}");
}

#[test]
fn a_reset_after_unanswered_resends_counts_only_the_time_they_do_not() {
    // The server answers a request (20 ms) with 1000 bytes at 30 ms; the client never
    // answers again. The server resends them after timeouts at 230, 630, 1430 and 3030 ms
    // (backing off) and resets at 5000 ms. The reset ends 4980 ms of work on the request;
    // the resends' waits (the rto-retransmission finding, from 30 to 3030 ms) are counted
    // there, so the reset adds only the rest, and says the server gave up on a silent peer.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 0, 1000, &[]),
        (30, S, ACK | PSH, 5001, 1101, 1000, 1000, &[]),
        (230, S, ACK | PSH, 5001, 1101, 1000, 1000, &[]),
        (630, S, ACK | PSH, 5001, 1101, 1000, 1000, &[]),
        (1430, S, ACK | PSH, 5001, 1101, 1000, 1000, &[]),
        (3030, S, ACK | PSH, 5001, 1101, 1000, 1000, &[]),
        (5000, S, RST | ACK, 6001, 1101, 0, 0, &[]),
    ]));
    assert_eq!(ids(&f), ["connection-reset", "rto-retransmission"], "{f:?}");
    let rto = &f[1];
    assert_eq!(rto.details.json()["receiver_silent"], true);
    assert_eq!(rto.start_ns, 30 * MS);
    assert_eq!(rto.end_ns, 3030 * MS, "the finding runs to the last resend");
    let reset = &f[0];
    // Four waits, 200 + 400 + 800 + 1600 ms: all inside the reset's span.
    assert_eq!(rto.cost_ns, 3000 * MS);
    let counted = 3000 * MS;
    assert_eq!(
        reset.details.json()["counted_as_retransmission_ms"],
        serde_json::json!(counted as f64 / 1e6)
    );
    assert_eq!(reset.cost_ns, 4980 * MS - counted);
    assert_eq!(reset.details.json()["gave_up_on_silent_peer"], true);
    assert!(reset
        .explanation
        .contains("giving up after its resends went unanswered"));
    assert!(reset.fix.contains("the reset is the consequence"));
}

#[test]
fn a_client_dropping_its_own_request_at_once_meant_to() {
    // The lab's stale-syn-lost-rst shape: 4 bytes sent, acknowledged, the client resets 5 ms
    // later (SO_LINGER {1, 0}): deliberate. The same reset 3 s later: it gave up waiting.
    let reset_after = |ms: i64| {
        run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 4, 1000, &[]),
            (21, S, ACK, 5001, 1005, 0, 1000, &[]),
            (20 + ms, C, RST | ACK, 1005, 5001, 0, 0, &[]),
        ]))
    };
    assert!(reset_after(5).is_empty());
    let f = reset_after(3_000);
    assert_eq!(ids(&f), ["connection-reset"], "{f:?}");
    assert_eq!(f[0].cost_ns, 3_000 * MS);
}

#[test]
fn a_reset_after_a_server_that_speaks_on_its_own_schedule_is_low() {
    // gRPC server streaming (Wireshark's grpc_web capture): the client's request at 20 ms,
    // the server's first message at 30 ms, acknowledged at 31 ms. With `stream`, the server
    // sends its next message a second later (1031 ms) with nothing asked and nothing in
    // flight: it sends on its own schedule. The client answers each message at once with 13
    // bytes (an HTTP/2 WINDOW_UPDATE) at 1033 ms, acknowledged, and resets the connection at
    // 4000 ms. The 13 bytes look like a request the server never answered (2967 ms to the
    // reset) but may be the client's reaction: named, `low`. Without the server's second
    // message the 13 bytes are the client's next request: `high`.
    let lines = |stream: bool| -> Vec<Line> {
        let mut l = with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (30, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
            (31, C, ACK, 1101, 5501, 0, 1000, &[]),
        ]);
        let mut s = 5501;
        if stream {
            l.extend_from_slice(&[
                (1031, S, ACK | PSH, 5501, 1101, 500, 1000, &[]),
                (1032, C, ACK, 1101, 6001, 0, 1000, &[]),
            ]);
            s = 6001;
        }
        l.extend_from_slice(&[
            (1033, C, ACK | PSH, 1101, s, 13, 1000, &[]),
            (1034, S, ACK, s, 1114, 0, 1000, &[]),
            (4000, C, RST | ACK, 1114, s, 0, 0, &[]),
        ]);
        l
    };
    let reset = |l: &[Line]| one_of(run(l), "connection-reset");
    let f = reset(&lines(true));
    assert_eq!(f.cost_ns, 2967 * MS);
    assert_eq!(f.confidence.level, Level::Low);
    assert!(
        f.confidence.reasons[0].contains("sends on its own schedule"),
        "{:?}",
        f.confidence
    );
    // The open request may not be one: the fix does not blame the server's silence.
    assert!(
        f.fix.starts_with("find why the client aborted"),
        "{}",
        f.fix
    );
    let f = reset(&lines(false));
    assert_eq!(f.cost_ns, 2967 * MS);
    assert_eq!(f.confidence.level, Level::High, "{:?}", f.confidence);
}

/// Wireshark's grpc_web capture, connection 241 (a client stream): the client's 13-byte
/// messages go on after pauses while its last one is unanswered, then it resets. Here: 100
/// bytes at 20 ms, acknowledged at once; 100 more at `again` ms, acknowledged; nothing from
/// the server; the client's reset at 3000 ms. After a pause of 200 ms or more the client sent
/// on its own schedule: its last message may ask for nothing, so the reset is `low`. 150 ms
/// later it is one request in two writes: `high`.
#[test]
fn a_reset_after_a_client_that_speaks_on_its_own_schedule_is_low() {
    let lines = |again: i64| {
        with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (21, S, ACK, 5001, 1101, 0, 1000, &[]),
            (again, C, ACK | PSH, 1101, 5001, 100, 1000, &[]),
            (again + 1, S, ACK, 5001, 1201, 0, 1000, &[]),
            (3000, C, RST | ACK, 1201, 5001, 0, 0, &[]),
        ])
    };
    let f = one_of(run(&lines(300)), "connection-reset");
    assert_eq!(f.cost_ns, 2980 * MS);
    assert_eq!(f.confidence.level, Level::Low, "{:?}", f.confidence);
    assert!(
        f.confidence.reasons[0].contains("the client sent more after a pause"),
        "{:?}",
        f.confidence
    );
    let f = one_of(run(&lines(170)), "connection-reset");
    assert_eq!(f.cost_ns, 2980 * MS);
    assert_eq!(f.confidence.level, Level::High, "{:?}", f.confidence);
}

/// tcpflow's bug5.pcap, in brief: the client's request at 20 ms, the server's delayed ACK of
/// it at 120 ms, nothing more until the client resets at 10 755 ms. The client gave up after
/// 10 735 ms of a request the server's stack had taken and its application never answered:
/// the finding says so and sends the reader to the server, not to the client's abort.
#[test]
fn a_client_resetting_a_request_the_server_took_and_never_answered_names_the_server() {
    let f = one_of(
        run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 68, 1000, &[]),
            (120, S, ACK, 5001, 1069, 0, 1000, &[]),
            (10_755, C, RST | ACK, 1069, 5001, 0, 0, &[]),
        ])),
        "connection-reset",
    );
    assert_eq!(f.cost_ns, 10_735 * MS);
    assert!(
        f.explanation.contains(
            "with a request waiting for its response, which the server (10.0.0.2:80) had acknowledged and not answered in 10735 ms"
        ),
        "{}",
        f.explanation
    );
    assert!(
        f.fix.starts_with(
            "the server's stack acknowledged the request and its application never answered"
        ),
        "{}",
        f.fix
    );
}

#[test]
fn a_round_trip_growing_many_times_its_minimum_is_a_queue() {
    // Captured at the server: a 20 ms round trip (SYN-ACK -> ACK), then a request and a
    // transfer of 100 segments, one every 10 ms (the bottleneck's pace); each segment's ACK
    // comes 60 ms after it (a standing queue of 40 ms). The window is never full. Round trip
    // samples (one at a time, Karn): the handshake's 20 ms, then 60 ms about every 60 ms.
    let mut l: Vec<Line> = vec![
        (0, C, SYN, 1000, 0, 0, 65535, &[]),
        (0, S, SYN | ACK, 5000, 1001, 0, 65535, &[]),
        (20, C, ACK, 1001, 5001, 0, 65535, &[]),
        (20, C, ACK | PSH, 1001, 5001, 100, 65535, &[]),
    ];
    let mut acks: Vec<Line> = Vec::new();
    for i in 0..100u32 {
        let t = 21 + 10 * i64::from(i);
        l.push((t, S, ACK, 5001 + i * 1000, 1101, 1000, 65535, &[]));
        acks.push((t + 60, C, ACK, 1101, 6001 + i * 1000, 0, 65535, &[]));
    }
    l.extend(acks);
    l.sort_by_key(|x| x.0);
    let f = drive_scaled(&[], Some(4), &l).findings;
    let q: Vec<&Finding> = f.iter().filter(|x| x.id == "queueing-delay").collect();
    assert_eq!(q.len(), 1, "{f:?}");
    assert_eq!(q[0].details.json()["rtt_min_ms"], 20.0);
    assert_eq!(q[0].details.json()["rtt_median_ms"], 60.0);
    assert_eq!(
        q[0].cost_ns,
        40 * MS,
        "the queue's 40 ms, once for the one exchange"
    );
    assert!(f.iter().all(|x| x.id != "rwnd-limited"), "{f:?}");
    // The same transfer with every ACK 20 ms after its segment: no queue.
    let mut l2: Vec<Line> = l
        .iter()
        .copied()
        .filter(|x| !(x.1 == C && x.5 == 0 && x.4 > 5001))
        .collect();
    for i in 0..100u32 {
        let t = 21 + 10 * i64::from(i);
        l2.push((t + 20, C, ACK, 1101, 6001 + i * 1000, 0, 65535, &[]));
    }
    l2.sort_by_key(|x| x.0);
    let f = drive_scaled(&[], Some(4), &l2).findings;
    assert!(f.iter().all(|x| x.id != "queueing-delay"), "{f:?}");
}

#[test]
fn late_acks_of_lone_segments_are_the_receivers_timer_not_a_queue() {
    // Captured at the client, a 60 ms round trip (SYN -> SYN-ACK). Twelve messages 2 s
    // apart, each ACKed 300 ms after it (skype.pcap 1836's shape: a peer whose delayed-ACK
    // timer waits about 260 ms). A lone message's ACK waits for that timer: no queue, though
    // the median sample (300 ms) is five times the minimum.
    let messages = |second: Option<u32>| {
        let mut l: Vec<Line> = vec![
            (0, C, SYN, 1000, 0, 0, 65535, &[]),
            (60, S, SYN | ACK, 5000, 1001, 0, 65535, &[]),
            (60, C, ACK, 1001, 5001, 0, 65535, &[]),
        ];
        let mut seq = 1001u32;
        for i in 0..12i64 {
            let t = 100 + 2000 * i;
            l.push((t, C, ACK | PSH, seq, 5001, 700, 65535, &[]));
            seq += 700;
            if let Some(len) = second {
                // A second segment right behind the first.
                l.push((t + 1, C, ACK | PSH, seq, 5001, len, 65535, &[]));
                seq += len;
            }
            l.push((t + 300, S, ACK, 5001, seq, 0, 65535, &[]));
        }
        drive_scaled(&[], Some(4), &l).findings
    };
    let f = messages(None);
    assert!(f.iter().all(|x| x.id != "queueing-delay"), "{f:?}");
    // A 100-byte segment behind each: still too little for the receiver to answer at once.
    let f = messages(Some(100));
    assert!(f.iter().all(|x| x.id != "queueing-delay"), "{f:?}");
    // A full segment behind each: the receiver held two and still answered 300 ms later, so
    // every packet waited: a queue (min 60, median 300, over the handshake and 12 samples).
    let f = messages(Some(1000));
    let q: Vec<&Finding> = f.iter().filter(|x| x.id == "queueing-delay").collect();
    assert_eq!(q.len(), 1, "{f:?}");
    assert_eq!(q[0].details.json()["rtt_min_ms"], 60.0);
    assert_eq!(q[0].details.json()["rtt_median_ms"], 300.0);
    assert_eq!(q[0].details.json()["samples"], 13);
}

/// What the detectors report, in order, every finding, exchange, stall and connection in full.
#[derive(Default)]
struct Transcript(Vec<String>);

impl Output for Transcript {
    fn finding(&mut self, f: &Finding) {
        self.0.push(format!("{f:?}"));
    }
    fn connection(&mut self, c: &Connection) {
        let mut c = c.clone();
        c.slot = 0; // (where the tracker kept it)
        self.0.push(format!("{c:?}"));
    }
    fn exchange(&mut self, x: &Exchange) {
        self.0.push(format!("{x:?}"));
    }
    fn stall(&mut self, s: &Stall) {
        self.0.push(format!("{s:?}"));
    }
}

/// (ms, from, to, flags, seq, ack, payload, options)
type Sent = (
    i64,
    (IpAddr, u16),
    (IpAddr, u16),
    u8,
    u32,
    u32,
    u32,
    TcpOptions,
);

/// The tracker keeps a connection that has seen only its client's SYNs compact, and replays
/// them through the detectors when it becomes full: every detector must report the same as
/// when every connection is full from its first SYN. 300 clients, each opening connections
/// one after another: SYNs answered at once or after being sent again 1 s, 2 s apart (an
/// unanswered ladder), never answered, refused once or on every try, met by a stale ACK and
/// reset, and answered connections carrying a request and a response (some late, some lost
/// and sent again), closed or left open; with timestamps and MSS on some clients' SYNs.
#[test]
fn compact_connections_give_the_findings_full_ones_do() {
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut rnd = move |m: u64| rng.random_range(0..m);
    let mut lines: Vec<Sent> = Vec::new();
    for k in 0..300u32 {
        let cl = (
            IpAddr::V4(Ipv4Addr::from(0x0a01_0000 + k)),
            30000 + k as u16,
        );
        let mut t = i64::from(rnd(20_000) as u32);
        for attempt in 0..4u32 {
            let isn = 1000 + attempt * 100_000 + k;
            let opts = |ts: i64| TcpOptions {
                mss: Some(1460),
                timestamp: Some((ts as u32, 0)),
                ..TcpOptions::default()
            };
            let syn_opts = if k % 2 == 0 {
                opts(t)
            } else {
                TcpOptions::default()
            };
            let mut l = |ms: i64, from, flags, seq, ack, len, o: TcpOptions| {
                let to = if from == cl { S } else { cl };
                lines.push((ms, from, to, flags, seq, ack, len, o));
            };
            let d = TcpOptions::default();
            l(t, cl, SYN, isn, 0, 0, syn_opts);
            match rnd(6) {
                // Sent again 1 s and 2 s later, answered after the third or never.
                0 | 1 => {
                    for (n, gap) in [1_000, 3_000].into_iter().enumerate() {
                        let o = if k % 2 == 0 {
                            opts(t + gap + n as i64)
                        } else {
                            d
                        };
                        l(t + gap, cl, SYN, isn, 0, 0, o);
                    }
                    t += 3_000;
                    if rnd(2) == 0 {
                        t += 400_000; // never answered: expires first
                        continue;
                    }
                }
                2 => {
                    l(t + 1, S, RST | ACK, 0, isn + 1, 0, d);
                    if rnd(2) == 0 {
                        l(t + 500, cl, SYN, isn, 0, 0, syn_opts);
                        l(t + 501, S, RST | ACK, 0, isn + 1, 0, d);
                    }
                    t += 20_000;
                    continue;
                }
                3 => {
                    l(t + 1, S, ACK, 777, 12345, 0, d);
                    l(t + 1, cl, RST, 12345, 0, 0, d);
                    t += 3;
                    l(t, cl, SYN, isn, 0, 0, syn_opts);
                }
                _ => {}
            }
            let rtt = 1 + rnd(40) as i64;
            l(t + rtt, S, SYN | ACK, 5000, isn + 1, 0, d);
            l(t + rtt, cl, ACK, isn + 1, 5001, 0, d);
            let mut u = t + rtt + rnd(300) as i64;
            l(u, cl, ACK | PSH, isn + 1, 5001, 200, d);
            u += rtt + rnd(200) as i64;
            if rnd(4) == 0 {
                l(u, S, ACK | PSH, 5001, isn + 201, 1400, d);
                u += 300;
            }
            l(u, S, ACK | PSH, 5001, isn + 201, 1400, d);
            l(u + rtt, cl, ACK, isn + 201, 6401, 0, d);
            if rnd(3) > 0 {
                l(u + rtt, cl, FIN | ACK, isn + 201, 6401, 0, d);
                l(u + 2 * rtt, S, FIN | ACK, 6401, isn + 202, 0, d);
                l(u + 2 * rtt, cl, ACK, isn + 202, 6402, 0, d);
            }
            t = u + 5_000 + rnd(5_000) as i64;
        }
    }
    lines.sort_by_key(|l| l.0); // stable: each connection's own order holds
    let run = |compact: bool| {
        let mut out = Transcript::default();
        let mut det = Detectors::new(&[], &mut out);
        let mut t = Tracker::new(Config {
            compact_syns: compact,
            ..Config::default()
        });
        for (i, &(ms, from, to, flags, seq, ack, len, options)) in lines.iter().enumerate() {
            let seg = TcpSegment {
                src: from.0,
                dst: to.0,
                src_port: from.1,
                dst_port: to.1,
                seq: Seq(seq),
                ack: Seq(ack),
                flags: TcpFlags(flags),
                window: 1000,
                payload_len: len,
                options,
                ip_id: i as u16 + 1,
                ttl: 64,
                first_fragment: false,
            };
            t.segment(&seg, At::new(i as u64 + 1, ms * MS), 54 + len, &mut det);
        }
        t.finish_all(&mut det);
        drop(det);
        out.0
    };
    let (full, compact) = (run(false), run(true));
    let count = |id: &str| {
        full.iter()
            .filter(|l| l.contains(&format!("id: \"{id}\"")))
            .count()
    };
    assert!(
        count("syn-unanswered") > 50 && count("syn-refused") > 50 && count("syn-stale-state") > 50,
        "the handshake detectors all find something"
    );
    assert_eq!(compact.len(), full.len());
    for (a, b) in compact.iter().zip(&full) {
        assert_eq!(a, b);
    }
}

/// Connection 1 on C's port (ISNs 1000 and 5000, 10 ms RTT, a 100-byte request and a 100-byte
/// response), then closed by `close` (the last lines, ending at 40 ms), then a new SYN from
/// the same port 5 ms later with ISN `isn`, answered as `answer` says.
fn reconnect(close: &[Line], isn: u32, answer: &[Line]) -> Vec<Line> {
    let mut l: Vec<Line> = HS.to_vec();
    l.push((20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]));
    l.push((30, S, ACK | PSH, 5001, 1101, 100, 1000, &[]));
    l.push((30, C, ACK, 1101, 5101, 0, 1000, &[]));
    l.extend_from_slice(close);
    l.push((45, C, SYN, isn, 0, 0, 1000, &[]));
    l.extend_from_slice(answer);
    l
}

#[test]
fn syn_stale_state_on_a_stale_socket_the_lost_rst_left() {
    // Seed 000: the client reset connection 1 (its RST never reached the server, whose socket
    // stays ESTABLISHED expecting byte 1101). The new SYN (ISN 90000) gets the stale socket's
    // challenge ACK for the old numbers (seq 5101, ack 1101) 10 ms later, the client resets
    // it (seq 1101) and sends the same SYN again 10 ms after that (Linux >= 5.6 retries
    // after 2 jiffies); the handshake completes one round trip later, at 75 ms.
    // Opening took 75 - 45 = 30 ms instead of one 10 ms round trip: 20 ms lost, the time from
    // the first SYN to the SYN that was answered (65 - 45).
    let lines = reconnect(
        &[(40, C, RST | ACK, 1101, 5101, 0, 0, &[])],
        90_000,
        &[
            (55, S, ACK, 5101, 1101, 0, 1000, &[]),
            (55, C, RST, 1101, 0, 0, 0, &[]),
            (65, C, SYN, 90_000, 0, 0, 1000, &[]),
            (75, S, SYN | ACK, 7000, 90_001, 0, 1000, &[]),
            (75, C, ACK, 90_001, 7001, 0, 1000, &[]),
        ],
    );
    let f = run(&lines);
    let stale: Vec<&Finding> = f.iter().filter(|f| f.id == "syn-stale-state").collect();
    assert_eq!(stale.len(), 1, "{f:?}");
    let s = stale[0];
    assert_eq!(s.cost_ns, 20 * MS, "{s:?}");
    assert_eq!(s.details.json()["previous_connection"], 1);
    assert_eq!(s.details.json()["stale_ack_is_old_rcv_nxt"], true);
    assert_eq!(s.details.json()["syns_again"], 1);
    assert_eq!(s.details.json()["answered"], true);
    assert!(
        s.explanation
            .ends_with("opening took 30.0 ms instead of one round trip: 20.0 ms lost."),
        "{}",
        s.explanation
    );
    // The evidence: the first SYN, the stale ACK, the client's RST, the SYN again and its
    // SYN-ACK (frames 8 to 12 of the transcript: 3 of the handshake, 3 of the exchange, the
    // RST, then these).
    assert_eq!(s.frames, [8, 9, 10, 11, 12]);
}

#[test]
fn syn_stale_state_is_silent_when_the_old_connection_closed_cleanly() {
    // The same reconnect after a FIN handshake that completed on both sides (the client
    // closed first, so its side holds the TIME-WAIT, not the server's): the SYN is answered
    // by a SYN-ACK at once. Nothing stale: no finding.
    let lines = reconnect(
        &[
            (31, C, FIN | ACK, 1101, 5101, 0, 1000, &[]),
            (36, S, FIN | ACK, 5101, 1102, 0, 1000, &[]),
            (36, C, ACK, 1102, 5102, 0, 1000, &[]),
        ],
        90_000,
        &[
            (55, S, SYN | ACK, 7000, 90_001, 0, 1000, &[]),
            (55, C, ACK, 90_001, 7001, 0, 1000, &[]),
        ],
    );
    let f = run(&lines);
    assert!(!ids(&f).contains(&"syn-stale-state"), "{f:?}");
}

#[test]
fn fast_retransmits_of_data_sent_past_the_window_blame_the_window_not_the_path() {
    // The client advertises 300 bytes (ACK 5001, window 300: right edge 5301). The server
    // sends five 100-byte segments at once: 5001-5301 fit, 5301-5501 lie past the edge. The
    // client acknowledges what fit (ACK 5301, window 0: the edge stays 5301) three times more,
    // and the server sends 5301 again: a fast retransmit of data first sent past the window,
    // which the receiver dropped for want of room.
    let mut lines = with_hs(&[(11, C, ACK, 1001, 5001, 0, 300, &[])]);
    for i in 0..5u32 {
        lines.push((12, S, ACK, 5001 + i * 100, 1001, 100, 1000, &[]));
    }
    for _ in 0..4 {
        lines.push((22, C, ACK, 1001, 5301, 0, 0, &[]));
    }
    lines.push((23, C, ACK, 1001, 5301, 0, 1000, &[]));
    lines.push((24, S, ACK, 5301, 1001, 100, 1000, &[]));
    lines.push((34, C, ACK, 1001, 5401, 0, 1000, &[]));
    let f = run(&lines);
    let fr: Vec<&Finding> = f.iter().filter(|f| f.id == "fast-retransmit").collect();
    assert_eq!(fr.len(), 1, "{f:?}");
    assert_eq!(fr[0].details.json()["beyond_window"], 1);
    assert!(
        fr[0]
            .fix
            .starts_with("the sender overran the receiver's window"),
        "{}",
        fr[0].fix
    );
    // The plain loss of a segment inside the window (lost_second_segment: 1000-byte window,
    // 500 bytes in flight) keeps a loss fix: the capture is at the client (the SYN-ACK 10 ms
    // after the SYN, the ACK at once), which the original reached, so the last stretch to it.
    let f = run(&lost_second_segment(3));
    assert_eq!(f[0].details.json()["beyond_window"], 0);
    assert!(
        f[0].fix
            .starts_with("the originals passed the capture point next to the receiver"),
        "{}",
        f[0].fix
    );
}

#[test]
fn a_first_resend_long_after_the_original_is_the_senders_stall() {
    // SF20 Trace3's shape: the server's segment 5101-5201 is lost; the client acknowledges
    // 5101 twice at once (alive), then the server sends nothing for 20 s and resends the
    // segment 22 s after it first sent it, with no resend before: no first retransmission
    // timer waits that long (200 ms - 3 s). The fix names the sender, not the path.
    let stalled = with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (11, S, ACK, 5101, 1001, 100, 1000, &[]),
        (11, S, ACK, 5201, 1001, 100, 1000, &[]),
        (21, C, ACK, 1001, 5101, 0, 1000, &[]),
        (21, C, ACK, 1001, 5101, 0, 1000, &[]),
        (22_011, S, ACK, 5101, 1001, 100, 1000, &[]),
        (22_021, C, ACK, 1001, 5301, 0, 1000, &[]),
    ]);
    let f = run(&stalled);
    let rto: Vec<&Finding> = f.iter().filter(|f| f.id == "rto-retransmission").collect();
    assert_eq!(rto.len(), 1, "{f:?}");
    assert_eq!(rto[0].cost_ns, 22_000 * MS);
    assert_eq!(rto[0].details.json()["sender_stalled"], true);
    assert!(
        rto[0]
            .fix
            .contains("first resent lost data 22000 ms after sending it"),
        "{}",
        rto[0].fix
    );
    // The same loss resent 300 ms later: a timer's wait. The capture is at the client (the
    // SYN-ACK 10 ms after the SYN, the ACK at once), which the original reached: the loss is on
    // the last stretch to the client or its ACK's way back, not the wider path.
    let timely: Vec<Line> = stalled
        .iter()
        .map(|l| match l.0 {
            22_011 => (311, l.1, l.2, l.3, l.4, l.5, l.6, l.7),
            22_021 => (321, l.1, l.2, l.3, l.4, l.5, l.6, l.7),
            _ => *l,
        })
        .collect();
    let f = run(&timely);
    let rto: Vec<&Finding> = f.iter().filter(|f| f.id == "rto-retransmission").collect();
    assert_eq!(rto.len(), 1, "{f:?}");
    assert_eq!(rto[0].details.json()["sender_stalled"], false);
    assert!(
        rto[0]
            .fix
            .starts_with("the originals passed the capture point next to the receiver (10.0.0.1)"),
        "{}",
        rto[0].fix
    );
}

#[test]
fn each_layer_names_only_the_layers_below_it() {
    // slots <- model <- detectors: the code (comments aside) of a lower layer names no module
    // of a layer above it, so the modules form no cycle.
    let code = |src: &str| -> String {
        src.lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let layers: [(&str, &str, &[&str]); 4] = [
        (
            "slots.rs",
            include_str!("slots.rs"),
            &["crate::model", "crate::detectors", "super::"],
        ),
        (
            "model/mod.rs",
            include_str!("model/mod.rs"),
            &["crate::detectors"],
        ),
        (
            "model/exchange.rs",
            include_str!("model/exchange.rs"),
            &["crate::detectors", "super::super"],
        ),
        (
            "model/stall.rs",
            include_str!("model/stall.rs"),
            &["crate::detectors", "super::super"],
        ),
    ];
    for (file, src, above) in layers {
        let code = code(src);
        for name in above {
            assert!(!code.contains(name), "{file} names {name}");
        }
    }
    // The test can fail: the detectors' registry does name the models.
    assert!(code(include_str!("detectors/mod.rs")).contains("crate::model"));
}

#[test]
fn a_resend_sooner_than_any_timer_is_no_timeout() {
    // The server's segment 5001+100 at 11 ms is sent again 1 ms later with no duplicate ACK
    // or SACK before it: no TCP timer fires within 2 ms (Linux's tail loss probe waits at
    // least 2 jiffies beyond two round trips; every RTO is longer), so it is no timeout (two
    // copies of one write, or segments a tool wrote). The window differs, so the tracker does
    // not take it for the same packet captured twice.
    let quick = with_hs(&[
        (11, S, ACK, 5001, 1001, 100, 1000, &[]),
        (12, S, ACK, 5001, 1001, 100, 999, &[]),
        (21, C, ACK, 1001, 5101, 0, 1000, &[]),
    ]);
    let f = run(&quick);
    assert!(
        !ids(&f).contains(&"rto-retransmission") && !ids(&f).contains(&"fast-retransmit"),
        "{f:?}"
    );
    // The same resend 250 ms after the original: the timer's (239 ms lost, from 11 to 250).
    let mut late = quick.clone();
    late[4].0 = 250;
    late[5].0 = 260;
    let f = run(&late);
    assert_eq!(ids(&f), ["rto-retransmission"], "{f:?}");
    assert_eq!(f[0].cost_ns, 239 * MS);
}

#[test]
fn a_syn_sent_again_with_its_data_is_a_handshake_retry_not_a_data_timeout() {
    // The client's SYN carries 10 bytes (TCP Fast Open) and is sent again 1 s later; the
    // second is answered (SYN-ACK acknowledging the data). The retry is the handshake's
    // (syn-unanswered names it), not data resent after a timeout.
    let f = run(&[
        (0, C, SYN, 1000, 0, 10, 1000, &[]),
        (1000, C, SYN, 1000, 0, 10, 1000, &[]),
        (1010, S, SYN | ACK, 5000, 1011, 0, 1000, &[]),
        (1010, C, ACK, 1011, 5001, 0, 1000, &[]),
    ]);
    assert!(ids(&f).contains(&"syn-unanswered"), "{f:?}");
    assert!(!ids(&f).contains(&"rto-retransmission"), "{f:?}");
}

#[test]
fn an_exchange_faster_than_the_syn_ack_bounds_the_round_trip() {
    // At the client: the SYN-ACK comes 220 ms after the SYN, but the request (230 ms) is
    // answered in full 40 ms later. An exchange needs a trip from the capture point to the
    // server and back, so that trip is at most 40 ms: the SYN-ACK was late for another reason
    // than the path. Round trip: 10 ms (SYN-ACK -> ACK) + 40 ms = 50 ms; cost: the handshake's
    // round trip (50 ms, not its 230 ms) and the one-round-trip exchange (40 ms) = 90 ms.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (220, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (230, C, ACK, 1001, 5001, 0, 1000, &[]),
        (230, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (270, S, ACK | PSH, 5001, 1101, 100, 1000, &[]),
        (280, C, ACK, 1101, 5101, 0, 1000, &[]),
    ]);
    let p: Vec<&Finding> = f.iter().filter(|x| x.id == "path-latency").collect();
    assert_eq!(p.len(), 1, "{f:?}");
    assert_eq!(p[0].details.json()["rtt_ms"], 50.0);
    assert_eq!(p[0].cost_ns, 90 * MS);
    assert!(
        p[0].explanation.contains("the handshake took 230 ms"),
        "{}",
        p[0].explanation
    );
}

/// A request at 10 ms, acknowledged at 20 ms and answered at 520 ms: a server delay of about
/// 500 ms on a plain connection.
fn answered_late() -> Vec<Line> {
    with_hs(&[
        (10, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (20, S, ACK, 5001, 1101, 0, 1000, &[]),
        (520, S, ACK | PSH, 5001, 1101, 100, 1000, &[]),
        (530, C, ACK, 1101, 5101, 0, 1000, &[]),
    ])
}

#[test]
fn an_mptcp_subflow_makes_no_finding_about_the_applications_timing() {
    // `answered_late` on a Multipath TCP subflow (an MPTCP option on the SYN-ACK and after):
    // the answer may have gone out on another subflow sooner (mptcp-v0.pcap in tcpdump's
    // tests: a reply 7.5 ms later on the other subflow, 4.4 s later on this one), so neither
    // server-delay nor the other timing ids are made.
    let lines = answered_late();
    let plain = drive_opts(&[], None, false, &lines);
    assert!(
        ids(&plain.findings).contains(&"server-delay"),
        "{:?}",
        plain.findings
    );
    assert_eq!(plain.exchanges.len(), 1);
    let subflow = drive_opts(&[], None, true, &lines);
    assert!(subflow.last.as_ref().is_some_and(|c| c.mptcp()));
    // Nor an exchange: the summary's split of time would count the subflow's silence.
    assert!(subflow.exchanges.is_empty(), "{:?}", subflow.exchanges);
    for id in SUBFLOW_BLIND {
        assert!(
            !ids(&subflow.findings).contains(&id),
            "{:?}",
            subflow.findings
        );
    }
}

#[test]
fn between_bgp_peers_no_message_is_taken_for_an_answer() {
    // bgp-lu-multiple-labels.pcap's shape (tcpdump's tests), `answered_late`: after the
    // session opened, one peer sends an UPDATE at 10 ms, acknowledged at 20 ms; the other
    // peer's next message (there a Cease NOTIFICATION, an operator's reset) comes at 520 ms.
    // On port 80 that is a server answering 500 ms late; between BGP peers (port 179) each
    // sends when its own routes or timers change, so it is no answer and no finding of
    // `PEER_BLIND` is made.
    let lines = answered_late();
    let web = drive_port(&[], None, false, 80, &lines).findings;
    assert!(ids(&web).contains(&"server-delay"), "{web:?}");
    let bgp = drive_port(&[], None, false, 179, &lines);
    assert_eq!(bgp.last.as_ref().map(|c| c.server.port), Some(179));
    for id in PEER_BLIND {
        assert!(!ids(&bgp.findings).contains(&id), "{:?}", bgp.findings);
    }
}

#[test]
fn a_reset_from_a_side_that_had_closed_answers_data_sent_after_its_close() {
    // of13_ericsson.pcapng's shape: the server answers nothing, closes with its FIN at 30 ms
    // (everything of its own delivered), the client sends a request at 40 ms into the closed
    // connection, and the server's kernel answers it with an RST at 41 ms. The close ended
    // the connection: no connection-reset.
    let closed = with_hs(&[
        (30, S, FIN | ACK, 5001, 1001, 0, 1000, &[]),
        (31, C, ACK, 1001, 5002, 0, 1000, &[]),
        (40, C, ACK | PSH, 1001, 5002, 100, 1000, &[]),
        (41, S, RST, 5002, 0, 0, 0, &[]),
    ]);
    let f = run(&closed);
    assert!(!ids(&f).contains(&"connection-reset"), "{f:?}");
    // Without the server's FIN, the same reset aborts the client's open request.
    let aborted = with_hs(&[
        (40, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (41, S, RST, 5001, 0, 0, 0, &[]),
    ]);
    let f = run(&aborted);
    assert!(ids(&f).contains(&"connection-reset"), "{f:?}");
}

#[test]
fn an_ack_of_data_the_client_sent_is_not_stale_state_without_the_clients_reset() {
    // The shape of four nDPI test captures (tls_invalid_reads, a fuzzed FTP login): the
    // SYN-ACK is missing or unreadable, the client ACKs it and sends 100 bytes, and the
    // server's next segment acknowledges those bytes (ack 1101). That ACK is of the new
    // connection's numbers: the client goes on, no reset, no SYN again.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (26, S, ACK | PSH, 5001, 1101, 200, 1000, &[]),
        (27, C, ACK, 1101, 5201, 0, 1000, &[]),
    ]);
    assert!(!ids(&f).contains(&"syn-stale-state"), "{f:?}");
}

/// A request at 10 ms that the server does not acknowledge, resent by timeout at 210, 610 and
/// 1410 ms, with `then` after it.
fn request_resent(then: &[Line]) -> Vec<Line> {
    let mut l = with_hs(&[
        (10, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (210, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (610, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (1410, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
    ]);
    l.extend_from_slice(then);
    l
}

#[test]
fn a_full_accept_queue_needs_its_own_syn_ack_or_a_server_that_takes_the_data_in_the_end() {
    // The server takes the last resend (ACK 1101 at 1420 ms) after sending nothing at all:
    // its host dropped the data until its application accepted (the lab's syn-backlog-full,
    // port 41648). Cost: the resends' waits, 10 -> 1410 ms.
    let taken = [
        (1420, S, ACK, 5001, 1101, 0, 1000, &[][..]),
        (1430, S, ACK | PSH, 5001, 1101, 50, 1000, &[][..]),
    ];
    let f = run(&request_resent(&taken));
    assert_eq!(ids(&f), ["accept-queue-full"], "{f:?}");
    assert_eq!(f[0].cost_ns, 1400 * MS);
    // The server never takes it, and the client gives up (skype.pcap's connections to one
    // CDN name in nDPI's tests): a path dropping the data, named as timeouts.
    let gave_up = [(3000, C, RST, 1101, 0, 0, 0, &[][..])];
    let f = run(&request_resent(&gave_up));
    assert!(!ids(&f).contains(&"accept-queue-full"), "{f:?}");
    assert!(ids(&f).contains(&"rto-retransmission"), "{f:?}");
    // A SYN-ACK with another ISN (7000) after the request: another handshake's (a middlebox
    // answering SYNs; KakaoTalk_chat.pcap), not the listener sending its own again.
    let other = [
        (20, S, SYN | ACK, 7000, 1001, 0, 1000, &[][..]),
        (3000, C, RST, 1101, 0, 0, 0, &[][..]),
    ];
    let f = run(&request_resent(&other));
    assert!(!ids(&f).contains(&"accept-queue-full"), "{f:?}");
    // The listener's own SYN-ACK (ISN 5000) sent again: the queue, even if never taken.
    let own = [
        (20, S, SYN | ACK, 5000, 1001, 0, 1000, &[][..]),
        (3000, C, RST, 1101, 0, 0, 0, &[][..]),
    ];
    let f = run(&request_resent(&own));
    assert!(ids(&f).contains(&"accept-queue-full"), "{f:?}");
}

#[test]
fn a_resend_after_the_server_took_the_request_is_the_paths_not_the_queues() {
    // alexa-app.pcapng's shape: the SYN-ACK comes again after the request, but the server
    // acknowledges the request and answers it; a later segment is lost and resent by timeout.
    // That resend is the path's (rto-retransmission), and no queue dropped anything.
    let f = run(&with_hs(&[
        (10, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (12, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (20, S, ACK | PSH, 5001, 1101, 50, 1000, &[]),
        (30, C, ACK | PSH, 1101, 5051, 100, 1000, &[]),
        (430, C, ACK | PSH, 1101, 5051, 100, 1000, &[]),
        (440, S, ACK, 5051, 1201, 0, 1000, &[]),
    ]));
    assert!(!ids(&f).contains(&"accept-queue-full"), "{f:?}");
    assert!(ids(&f).contains(&"rto-retransmission"), "{f:?}");
}

#[test]
fn a_burst_after_idle_is_a_restart_only_when_acks_release_it_from_two_segments_or_more() {
    let run = |l: &[Line]| drive_scaled(&[], Some(4), l).findings;
    let restarts = |l: &[Line]| {
        run(l)
            .iter()
            .filter(|f| f.id == "slow-start-restart")
            .count()
    };
    assert_eq!(restarts(&two_responses(3_000, true)), 1, "the control");
    // The same second burst with no ACK from the client until it ends (tor.pcap's relayed
    // cells, KakaoTalk): nothing released its flights, the application wrote them.
    let mut unacked = two_responses(3_000, true);
    let last = unacked.len() - 1;
    let second_req = unacked
        .iter()
        .rposition(|l| l.1 == C && l.5 == 100)
        .unwrap_or(0);
    let mut i = 0;
    unacked.retain(|l| {
        i += 1;
        i - 1 <= second_req || i - 1 == last || l.1 == S
    });
    assert_eq!(restarts(&unacked), 0, "{:?}", run(&unacked));
    // A second burst whose first flight is one 1000-byte segment, under two full segments
    // (536 bytes each without an MSS option): no stack restarts below that; the application
    // wrote one small piece first (skype's and whatsapp's messages).
    let mut small = two_responses(3_000, false);
    small.truncate(small.len() - 151);
    let seq = 5001 + 150_000;
    let grow = [
        (0, 1),
        (50, 2),
        (100, 4),
        (150, 8),
        (200, 16),
        (250, 32),
        (300, 87),
    ];
    let t = small.last().map_or(0, |l| l.0);
    response(&mut small, t + 50, seq, 1201, &grow);
    assert_eq!(restarts(&small), 0, "{:?}", run(&small));
}

#[test]
fn flights_seen_sooner_after_an_ack_than_the_sender_is_away_were_not_released_by_it() {
    // Captured at the client of a 50 ms path (the server is the whole round trip away). The
    // second response grows as slow start does, 10, 20, 40 and 80 segments, but each flight
    // comes 35 ms after the client's ACK of the one before: an ACK needs 50 ms to reach the
    // server and bring back what it released, so these flights left before it arrived (tor.pcap's
    // relayed cells: 3 x 1460 bytes 93 ms after the ACK on a 144 ms path). No restart.
    let run = |l: &[Line]| drive_scaled(&[], Some(4), l).findings;
    let restarts = |flights: &[(i64, u32)]| {
        let mut l = handshake(50, 65535);
        l.push((60, C, ACK | PSH, 1001, 5001, 100, 65535, &[]));
        let slow = [(0, 10), (50, 20), (100, 40), (150, 80)];
        let seq = response(&mut l, 110, 5001, 1101, &slow);
        l.push((3_260, C, ACK | PSH, 1101, seq, 100, 65535, &[]));
        response(&mut l, 3_310, seq, 1201, flights);
        run(&l)
            .iter()
            .filter(|f| f.id == "slow-start-restart")
            .count()
    };
    assert_eq!(
        restarts(&[(0, 10), (50, 20), (100, 40), (150, 80)]),
        1,
        "the control"
    );
    assert_eq!(restarts(&[(0, 10), (35, 20), (70, 40), (105, 80)]), 0);
}

#[test]
fn a_segment_seen_sooner_after_the_late_ack_than_the_sender_is_away_left_before_it() {
    // Captured 10 ms from the server of a 10 ms path (at the client); the server sends A (100
    // bytes), the client's pure ACK comes 100 ms later (its delayed-ACK timer), then the
    // server's B (12 bytes).
    // netflix.pcap 1232 (nDPI): B 1 ms after the ACK, which needs 5 ms to reach the server
    // and B 5 ms to come back: B left with A and came late by the path. Not Nagle. The same
    // captured 2 ms from the server (the handshake's SYN-ACK 2 ms after the SYN) and B 1 ms
    // after the ACK: released by it, held 101 ms from A.
    let b_after = |to_server: i64| {
        run(&[
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (to_server, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (10, C, ACK, 1001, 5001, 0, 1000, &[]),
            (20, C, ACK | PSH, 1001, 5001, 10, 1000, &[]),
            (30, S, ACK | PSH, 5001, 1011, 100, 1000, &[]),
            (130, C, ACK, 1011, 5101, 0, 1000, &[]),
            (131, S, ACK | PSH, 5101, 1011, 12, 1000, &[]),
        ])
    };
    assert!(!ids(&b_after(10)).contains(&"nagle-delayed-ack"));
    let f = b_after(2);
    let n: Vec<&Finding> = f.iter().filter(|x| x.id == "nagle-delayed-ack").collect();
    assert_eq!(n.len(), 1, "{f:?}");
    assert_eq!(n[0].cost_ns, 101 * MS);
    assert_eq!(
        n[0].details.json()["ack_delays_ms"],
        serde_json::json!([100.0])
    );
}

#[test]
fn a_held_segment_nobody_answered_is_low() {
    // tcpdump's bgp-4byte-asn.pcap: a router sends an UPDATE (A), the peer's ACK comes 40 ms
    // late, and the KEEPALIVE Nagle held (B) leaves with it; the peer sends nothing for
    // seconds after. The hold is named (A to B, 40 ms) but `low`: nobody may have waited for
    // B. The peer answering B 1 ms after it (the control) or 2 s after it (its own turn);
    // or closing 1 ms after it, having read it (the fixture loopback-http.pcap: an HTTP
    // client's FIN right after the response's body that Nagle held).
    let held = |answer_ms: Option<i64>, fin: bool| -> Finding {
        let mut l = with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (60, S, ACK, 5001, 1101, 0, 1000, &[]),
            (60, C, ACK | PSH, 1101, 5001, 19, 1000, &[]),
        ]);
        match (answer_ms, fin) {
            (Some(t), false) => l.push((t, S, ACK | PSH, 5001, 1120, 10, 1000, &[])),
            (Some(t), true) => l.push((t, S, ACK | TcpFlags::FIN, 5001, 1120, 0, 1000, &[])),
            (None, _) => {}
        }
        one_of(run(&l), "nagle-delayed-ack")
    };
    let f = held(None, false);
    assert_eq!(f.cost_ns, 40 * MS);
    assert_eq!(f.confidence.level, Level::Low);
    assert!(
        f.confidence.reasons[0].contains("answered none"),
        "{:?}",
        f.confidence
    );
    assert_eq!(held(Some(61), false).confidence.level, Level::High);
    assert_eq!(held(Some(2_060), false).confidence.level, Level::Low);
    assert_eq!(held(Some(61), true).confidence.level, Level::High);
}

#[test]
fn far_from_the_sender_a_segment_echoing_the_late_ack_was_released_by_it() {
    // tcpdump's of10_7050sx_bsn.pcap: captured at the receiver (an OpenFlow controller), the
    // sender 4 ms away (the client's handshake ACK 4 ms after the SYN-ACK). The client sends A
    // (100 bytes) at 20 ms; the server's pure ACK comes at 60 ms (its delayed-ACK timer, TSval
    // 1004); B (100 bytes) is seen `b` ms later, one round trip after the ACK. B echoing the
    // ACK's TSval left after the ACK reached the client: Nagle held it, A to B lost. B echoing
    // an older TSval left before the ACK arrived (sent with A, late by the path): not Nagle.
    // B echoing it but 11 ms after the ACK, beyond two round trips and 2 ms: written late.
    let run_b = |b: i64, echo: bool| -> Vec<Finding> {
        let lines: Vec<Line> = vec![
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (4, C, ACK, 1001, 5001, 0, 1000, &[]),
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (60, S, ACK, 5001, 1101, 0, 1000, &[]),
            (60 + b, C, ACK | PSH, 1101, 5001, 100, 1000, &[]),
            (61 + b, S, ACK | PSH, 5001, 1201, 10, 1000, &[]),
        ];
        // Line i carries TSval 1000 + i; B echoes the late ACK's (line 4) or the SYN-ACK's.
        let hook = |i: usize, s: &mut TcpSegment| {
            let o = &mut s.options;
            let ecr = match (i, echo) {
                (5, true) => 1004,
                (5, false) => 1001,
                _ => 0,
            };
            o.timestamp = Some((1000 + i as u32, ecr));
        };
        let f = drive_hook(&[], None, false, S.1, [None, None], &lines, hook).findings;
        of_id(f, "nagle-delayed-ack")
    };
    let f = run_b(4, true);
    assert_eq!(ids(&f), ["nagle-delayed-ack"], "{f:?}");
    assert_eq!(f[0].cost_ns, 44 * MS);
    assert_eq!(f[0].frames, [4, 5, 6]);
    assert!(run_b(4, false).is_empty());
    assert!(run_b(11, true).is_empty());
}

#[test]
fn a_full_segment_is_the_mss_less_the_timestamp_option() {
    // nDPI's netflix.pcap: a 1460-byte MSS, every segment with timestamps, so 1448 bytes
    // fill a segment; the server sends A (1448), the client's ACK is late, B (1448) follows:
    // one full segment per round trip is the congestion window's, not Nagle's. Captured at
    // the server (its SYN-ACK at once), B leaves with the ACK. A control with 1000-byte
    // segments is Nagle's.
    let late = |len: u32| -> Vec<Finding> {
        let lines: Vec<Line> = vec![
            (0, C, SYN, 1000, 0, 0, 1000, &[]),
            (0, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
            (10, C, ACK, 1001, 5001, 0, 1000, &[]),
            (20, C, ACK | PSH, 1001, 5001, 10, 1000, &[]),
            (30, S, ACK | PSH, 5001, 1011, len, 1000, &[]),
            (80, C, ACK, 1011, 5001 + len, 0, 1000, &[]),
            (80, S, ACK | PSH, 5001 + len, 1011, len, 1000, &[]),
        ];
        let hook = |i: usize, s: &mut TcpSegment| {
            let o = &mut s.options;
            o.timestamp = Some((1000 + i as u32, 0));
        };
        let mss = [Some(1460), Some(1460)];
        let f = drive_hook(&[], None, false, S.1, mss, &lines, hook).findings;
        of_id(f, "nagle-delayed-ack")
    };
    assert!(late(1448).is_empty());
    assert_eq!(ids(&late(1000)), ["nagle-delayed-ack"]);
}

#[test]
fn a_segment_of_a_full_mss_released_by_a_late_ack_is_not_nagle() {
    // webex.pcap and waze.pcap (nDPI): A, the peer's ACK 50 ms late, then B of 2479 or 8762
    // bytes within microseconds. Nagle never holds a full segment (536 bytes here, no MSS
    // option): the congestion window held B. A 100-byte B is Nagle's (the control).
    let late = |b_len: u32| {
        run(&with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (60, S, ACK, 5001, 1101, 0, 1000, &[]),
            (60, C, ACK | PSH, 1101, 5001, b_len, 1000, &[]),
            (61, S, ACK | PSH, 5001, 1101 + b_len, 10, 1000, &[]),
        ]))
    };
    assert_eq!(ids(&late(100)), ["nagle-delayed-ack"]);
    assert!(!ids(&late(2000)).contains(&"nagle-delayed-ack"));
}

#[test]
fn a_reset_that_acknowledges_the_whole_response_closes_a_finished_exchange() {
    // webex.pcap's close (nDPI): the response's last segment carries a TLS close_notify;
    // the client, closing with it unread, resets with RST,ACK acknowledging all of it
    // (ack 1301 at 40 ms): nothing was in flight, the exchange was done.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (30, S, ACK | PSH, 5001, 1101, 300, 1000, &[]),
        (40, C, RST | ACK, 1101, 5301, 0, 0, &[]),
    ]));
    assert!(!ids(&f).contains(&"connection-reset"), "{f:?}");
    // The same reset acknowledging only the first 100 bytes: 200 were still in flight.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (30, S, ACK | PSH, 5001, 1101, 300, 1000, &[]),
        (40, C, RST | ACK, 1101, 5101, 0, 0, &[]),
    ]));
    assert!(ids(&f).contains(&"connection-reset"), "{f:?}");
    // The server's own reset crossing the client's (aimini-http.pcap, zattoo.pcap: captured
    // a microsecond after it): the connection was over, its 300 bytes were acknowledged by
    // the client's RST,ACK, which the tracker does not count as an ACK.
    let f = run(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (30, S, ACK | PSH, 5001, 1101, 300, 1000, &[]),
        (40, C, RST | ACK, 1101, 5301, 0, 0, &[]),
        (40, S, RST | ACK, 5301, 1101, 0, 0, &[]),
    ]));
    assert!(!ids(&f).contains(&"connection-reset"), "{f:?}");
}

#[test]
fn an_exchange_slowed_by_something_else_counts_the_typical_round_trips_of_the_path() {
    // Three exchanges on a 40 ms path: 40, 40 and 4 000 ms (the third waited on the client's
    // pause or a timeout: zcash.pcap, signal.pcap in nDPI's tests). The path's share of the
    // long one is the median exchange's single round trip, not 100: cost = handshake 40 +
    // 3 x 40 = 160 ms.
    let mut l = handshake(40, 1000);
    let (mut c, mut s, mut t) = (1001u32, 5001u32, 50i64);
    for took in [40, 40, 4_000] {
        l.push((t, C, ACK | PSH, c, s, 100, 1000, &[]));
        c += 100;
        l.push((t + took, S, ACK | PSH, s, c, 100, 1000, &[]));
        s += 100;
        l.push((t + took, C, ACK, c, s, 0, 1000, &[]));
        t += took + 10;
    }
    let f = run(&l);
    let p: Vec<&Finding> = f.iter().filter(|f| f.id == "path-latency").collect();
    assert_eq!(p.len(), 1, "{f:?}");
    assert_eq!(p[0].cost_ns, 160 * MS, "{:?}", p[0]);
    assert_eq!(
        p[0].details.json()["round_trips"],
        serde_json::json!([1, 1, 1])
    );
}

#[test]
fn a_reset_answering_data_that_crossed_the_resetters_fin_is_a_close() {
    // no_sni.pcap's close (nDPI): the client sends its 24-byte close_notify with FIN at
    // 40 ms; the server's 31 bytes, sent before that reached it, arrive at 45 ms and draw the
    // client's reset at 45 ms, 5 ms after its FIN, within the 10 ms round trip: the
    // close_notify could not yet be acknowledged, and nothing was aborted.
    let lines = |rst_ms: i64| {
        with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (30, S, ACK | PSH, 5001, 1101, 200, 1000, &[]),
            (40, C, ACK | PSH | FIN, 1101, 5201, 24, 1000, &[]),
            (rst_ms, S, ACK | PSH, 5201, 1101, 31, 1000, &[]),
            (rst_ms, C, RST, 1126, 0, 0, 0, &[]),
        ])
    };
    let f = run(&lines(45));
    assert!(!ids(&f).contains(&"connection-reset"), "{f:?}");
    // Two seconds after its FIN with its 24 bytes still unacknowledged, the reset throws
    // them away: named.
    let f = run(&lines(2_040));
    assert!(ids(&f).contains(&"connection-reset"), "{f:?}");
}

#[test]
fn the_answer_to_a_keepalive_probe_is_not_data_the_capture_missed() {
    // http_ipv6.pcap, pinterest.pcap, tumblr.pcap (nDPI): a capture that begins at an idle
    // connection's keep-alive probe (no data, sequence one below the next, RFC 9293 section
    // 3.8.4); the peer's ACK is one above it. Nothing was missed. Three above (no probe
    // answers that way): 3 bytes the capture did not see.
    let probe = |ack: u32| {
        run(&[
            (0, C, ACK, 1000, 5000, 0, 1000, &[]),
            (18, S, ACK, 5000, ack, 0, 1000, &[]),
        ])
    };
    assert!(
        !ids(&probe(1001)).contains(&"capture-loss"),
        "{:?}",
        probe(1001)
    );
    assert!(
        ids(&probe(1003)).contains(&"capture-loss"),
        "{:?}",
        probe(1003)
    );
}

#[test]
fn two_duplicate_acks_or_the_latest_sack_start_recovery() {
    // anyconnect-vpn.pcap (nDPI): two duplicate ACKs, the resend 82 us later, 44 ms after
    // the original on a 42 ms path: early retransmit or RACK, no timer (200 ms at least).
    assert_eq!(ids(&run(&lost_second_segment(2))), ["fast-retransmit"]);
    // tumblr.pcap (nDPI): SACK blocks arrive for 140 ms (the first at 21 ms, the last at
    // 160 ms, on a 10 ms path) before the hole is resent at 161 ms: recovery, timed from the
    // latest SACK, not from the first.
    let mut lines = with_hs(&[]);
    for i in 0..3u32 {
        lines.push((11, S, ACK, 5001 + i * 100, 1001, 100, 1000, &[]));
    }
    for t in (21..=160).step_by(20) {
        lines.push((t, C, ACK, 1001, 5001, 0, 1000, &[(5101, 5301)]));
    }
    lines.push((161, S, ACK, 5001, 1001, 100, 1000, &[]));
    assert_eq!(ids(&run(&lines)), ["fast-retransmit"]);
}

#[test]
fn data_resent_after_the_peer_reset_the_connection_waits_for_nobody() {
    // skype_no_unknown.pcap (nDPI): the server sends its FIN and then a reset the client
    // ignores (out of its window); the client goes on resending 100 bytes for seconds into a
    // connection nobody holds. No loss is named. The same resends before any reset: a timeout.
    let lines = |reset: bool| {
        let mut l = with_hs(&[(20, C, ACK | PSH, 1001, 5001, 100, 1000, &[])]);
        if reset {
            l.push((25, S, RST, 9999, 0, 0, 0, &[]));
        }
        l.push((300, C, ACK | PSH, 1001, 5001, 100, 1000, &[]));
        l.push((900, C, ACK | PSH, 1001, 5001, 100, 1000, &[]));
        l
    };
    assert!(ids(&run(&lines(false))).contains(&"rto-retransmission"));
    let f = run(&lines(true));
    assert!(!ids(&f).contains(&"rto-retransmission"), "{f:?}");
}

#[test]
fn a_zero_window_after_the_peers_fin_holds_nothing_back() {
    // skype.pcap 50117 (nDPI): both FINs exchanged, then the client's last ACK with a zero
    // window. Nothing more could come: no stall. The same zero window before any FIN, opened
    // 100 ms later, the server's data 1 ms after the update: a 101 ms zero-window stall.
    let after_fin = run(&with_hs(&[
        (20, S, ACK | PSH | FIN, 5001, 1001, 100, 1000, &[]),
        (21, C, ACK | FIN, 1001, 5102, 0, 1000, &[]),
        (30, C, ACK, 1002, 5102, 0, 0, &[]),
    ]));
    assert!(!ids(&after_fin).contains(&"zero-window"), "{after_fin:?}");
    let before = run(&with_hs(&[
        (20, S, ACK | PSH, 5001, 1001, 100, 1000, &[]),
        (21, C, ACK, 1001, 5101, 0, 0, &[]),
        (121, C, ACK, 1001, 5101, 0, 1000, &[]),
        (122, S, ACK | PSH, 5101, 1001, 100, 1000, &[]),
    ]));
    let z: Vec<&Finding> = before.iter().filter(|f| f.id == "zero-window").collect();
    assert_eq!(z.len(), 1, "{before:?}");
    assert_eq!(z[0].cost_ns, 101 * MS);
}

#[test]
fn a_refusal_then_the_same_syn_answered_costs_the_wait_until_it() {
    // rtsp.pcap 289 (nDPI): a Windows client's SYN refused at 1 ms; it sends the same SYN
    // (same ISN) again 505 ms after the reset, and that one is answered: 506 ms lost, from
    // the first SYN to the one answered.
    let f = run(&[
        (0, C, SYN, 1000, 0, 0, 1000, &[]),
        (1, S, RST | ACK, 0, 1001, 0, 0, &[]),
        (506, C, SYN, 1000, 0, 0, 1000, &[]),
        (507, S, SYN | ACK, 5000, 1001, 0, 1000, &[]),
        (507, C, ACK, 1001, 5001, 0, 1000, &[]),
    ]);
    let r: Vec<&Finding> = f.iter().filter(|f| f.id == "syn-refused").collect();
    assert_eq!(r.len(), 1, "{f:?}");
    assert_eq!(r[0].cost_ns, 506 * MS);
    assert_eq!(r[0].frames, [1, 2, 3]);
}

#[test]
fn a_slow_answer_after_the_server_spoke_on_its_own_is_low() {
    // grpc_web's shape (Wireshark's test capture): a request at 20 ms answered at once; then
    // the server sends again at 1035 ms, a second after the client had acknowledged all of
    // it, with nothing asked (a stream's next message). The client's 13 bytes at 1038 ms
    // (a WINDOW_UPDATE) are followed by the server's next message a second later: named,
    // but `low`, since that message may be the stream's next one and not an answer.
    let lines = |push: bool| -> Vec<Line> {
        let s = if push { 6001 } else { 5501 };
        let mut l = with_hs(&[
            (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
            (21, S, ACK, 5001, 1101, 0, 1000, &[]),
            (25, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
            (35, C, ACK, 1101, 5501, 0, 1000, &[]),
        ]);
        if push {
            l.push((1035, S, ACK | PSH, 5501, 1101, 500, 1000, &[]));
        }
        l.extend_from_slice(&[
            (1038, C, ACK | PSH, 1101, s, 13, 1000, &[]),
            (1048, S, ACK, s, 1114, 0, 1000, &[]),
            (2038, S, ACK | PSH, s, 1114, 500, 1000, &[]),
            (2048, C, ACK, 1114, s + 500, 0, 1000, &[]),
        ]);
        l
    };
    let delay = |l: &[Line]| -> Vec<Finding> {
        run(l)
            .into_iter()
            .filter(|f| f.id == "server-delay")
            .collect()
    };
    let f = delay(&lines(true));
    assert_eq!(ids(&f), ["server-delay"], "{f:?}");
    assert_eq!(f[0].cost_ns, 990 * MS);
    assert_eq!(f[0].confidence.level, Level::Low);
    assert!(
        f[0].confidence.reasons[0].contains("the server sent more after a pause"),
        "{:?}",
        f[0].confidence
    );
    // Without the server's message of its own, the same wait is an answer: `high`.
    let f = delay(&lines(false));
    assert_eq!(ids(&f), ["server-delay"], "{f:?}");
    assert_eq!(f[0].confidence.level, Level::High, "{:?}", f[0].confidence);
    // A slow answer before the server's message of its own keeps its level (gRPC's first
    // response 500 ms late, then its stream).
    let f = delay(&with_hs(&[
        (20, C, ACK | PSH, 1001, 5001, 100, 1000, &[]),
        (21, S, ACK, 5001, 1101, 0, 1000, &[]),
        (520, S, ACK | PSH, 5001, 1101, 500, 1000, &[]),
        (530, C, ACK, 1101, 5501, 0, 1000, &[]),
        (1530, S, ACK | PSH, 5501, 1101, 500, 1000, &[]),
        (1540, C, ACK, 1101, 6001, 0, 1000, &[]),
    ]));
    assert_eq!(ids(&f), ["server-delay"], "{f:?}");
    assert_eq!(f[0].cost_ns, 490 * MS);
    assert_eq!(f[0].confidence.level, Level::High, "{:?}", f[0].confidence);
}

#[test]
fn a_slow_answer_after_the_client_spoke_again_unanswered_is_low() {
    // netperfmeter's shape (Wireshark's test capture): the client sends 100 bytes at 20 ms,
    // acknowledged at once, and 100 more at `again` ms, its request still unanswered; the
    // server sends 300 bytes at 700 ms. After a pause of at least 200 ms (and four round
    // trips) beyond the 10 ms to the server, the client sent on its own schedule (or its
    // request in parts): named, but `low`.
    let lines = |again: i64, acked: bool| -> Vec<Line> {
        let mut l = with_hs(&[(20, C, ACK | PSH, 1001, 5001, 100, 1000, &[])]);
        if acked {
            l.push((21, S, ACK, 5001, 1101, 0, 1000, &[]));
        }
        l.extend_from_slice(&[
            (again, C, ACK | PSH, 1101, 5001, 100, 1000, &[]),
            (again + 1, S, ACK, 5001, 1201, 0, 1000, &[]),
            (700, S, ACK | PSH, 5001, 1201, 300, 1000, &[]),
            (710, C, ACK, 1201, 5301, 0, 1000, &[]),
        ]);
        l
    };
    let delay = |l: &[Line]| one_of(run(l), "server-delay");
    let f = delay(&lines(300, true));
    assert_eq!(f.cost_ns, 390 * MS);
    assert_eq!(f.confidence.level, Level::Low);
    assert!(
        f.confidence.reasons[0].contains("the client sent more after a pause"),
        "{:?}",
        f.confidence
    );
    // 150 ms later is within the pause that shows a schedule: one request in two writes.
    let f = delay(&lines(170, true));
    assert_eq!(f.cost_ns, 520 * MS);
    assert_eq!(f.confidence.level, Level::High, "{:?}", f.confidence);
    // The first part not yet acknowledged when the second went: the client may have been
    // held by its window or a loss, not its own schedule.
    let f = delay(&lines(300, false));
    assert_eq!(f.confidence.level, Level::High, "{:?}", f.confidence);
}

/// tcpflow's bug3.pcap, in brief: the capture holds the server's packets only. Its SYN-ACK
/// (the client's SYN unseen), then 1000 bytes of response acknowledging 175 bytes of request
/// the capture does not hold, sent again at 400, 1200 and 2800 ms. The timeouts are the
/// server's to see; whether the client answered is not: `receiver_silent` is not claimed, and
/// the finding is `medium` for the one direction captured.
#[test]
fn a_capture_of_one_direction_does_not_call_the_other_silent() {
    let lines: Vec<Line> = vec![
        (0, S, SYN | ACK, 5000, 1001, 0, 65535, &[]),
        (100, S, ACK, 5001, 1176, 1000, 65535, &[]),
        (500, S, ACK, 5001, 1176, 1000, 65535, &[]),
        (1300, S, ACK, 5001, 1176, 1000, 65535, &[]),
        (2900, S, ACK, 5001, 1176, 1000, 65535, &[]),
    ];
    let f = one_of(run(&lines), "rto-retransmission");
    assert_eq!(f.details.json()["receiver_silent"], false);
    assert_eq!(f.confidence.level, Level::Medium, "{:?}", f.confidence);
    assert!(f.confidence.reasons.contains(&crate::confidence::ONE_WAY));
    assert!(f.fix.starts_with("find the loss on the path"), "{}", f.fix);
    // The client's SYN and its ACK in the capture, nothing after: the client was silent.
    let mut two_way = vec![
        (0, C, SYN, 1000, 0, 0, 65535, &[][..]),
        (1, C, ACK, 1001, 5001, 0, 65535, &[][..]),
    ];
    two_way.insert(1, lines[0]);
    two_way.extend_from_slice(&lines[1..]);
    let f = one_of(run(&two_way), "rto-retransmission");
    assert_eq!(f.details.json()["receiver_silent"], true);
    assert!(!f.confidence.reasons.contains(&crate::confidence::ONE_WAY));
}

/// tcpflow's test4.pcap, in brief (captured at the client): the SYN-ACK comes 82 ms after the
/// SYN (a first contact's delay), the first request (90 ms) is answered at 419 ms, the second
/// (500 ms) in 18 ms. No exchange is faster than the path's round trip, so the path takes at
/// most 18 ms and the handshake was slowed by something else: the first answer took 329 ms,
/// 311 ms beyond that round trip (more than four of them). Judged by the handshake's 82 ms it
/// was 247 ms, under four round trips (328 ms), and went unnamed.
#[test]
fn an_exchange_faster_than_the_handshake_bounds_the_round_trip_server_delay_is_judged_by() {
    let lines: Vec<Line> = vec![
        (0, C, SYN, 1000, 0, 0, 65535, &[]),
        (82, S, SYN | ACK, 5000, 1001, 0, 65535, &[]),
        (82, C, ACK, 1001, 5001, 0, 65535, &[]),
        (90, C, ACK | PSH, 1001, 5001, 100, 65535, &[]),
        (207, S, ACK, 5001, 1101, 0, 65535, &[]),
        (419, S, ACK | PSH, 5001, 1101, 500, 65535, &[]),
        (430, C, ACK, 1101, 5501, 0, 65535, &[]),
        (500, C, ACK | PSH, 1101, 5501, 100, 65535, &[]),
        (518, S, ACK | PSH, 5501, 1201, 500, 65535, &[]),
        (530, C, ACK, 1201, 6001, 0, 65535, &[]),
    ];
    let f = one_of(run(&lines), "server-delay");
    assert_eq!(f.cost_ns, 311 * MS);
    assert_eq!(
        f.details.json()["server_time_ms"],
        serde_json::json!([311.0])
    );
    assert!(
        f.explanation.contains(
            "beyond the 18.0 ms round trip (the handshake took 82.0 ms, but an exchange came back in 18.0 ms: the SYN-ACK was late, not the path)"
        ),
        "{}",
        f.explanation
    );
    // A third request sent again 20 ms after the original and answered 1 ms after the
    // resend: the answer is the original's (21 ms), and an exchange timed from a resend times
    // no round trip (Karn), so the bound stays 18 ms and the finding the same.
    let mut resent = lines.clone();
    resent.extend_from_slice(&[
        (600, C, ACK | PSH, 1201, 6001, 100, 65535, &[]),
        (620, C, ACK | PSH, 1201, 6001, 100, 65535, &[]),
        (621, S, ACK | PSH, 6001, 1301, 500, 65535, &[]),
        (630, C, ACK, 1301, 6501, 0, 65535, &[]),
    ]);
    assert_eq!(one_of(run(&resent), "server-delay").cost_ns, 311 * MS);
    // With the second exchange as slow as the handshake, nothing bounds it: unnamed.
    let mut slow = lines.clone();
    slow[8].0 = 600;
    slow[9].0 = 610;
    assert!(of_id(run(&slow), "server-delay").is_empty());
}
