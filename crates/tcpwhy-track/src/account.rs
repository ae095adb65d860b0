//! TCP accounting: what one segment does to its connection. The tracker finds the connection
//! a segment belongs to; `Connection::on_segment` counts the segment, follows the handshake,
//! both sides' sequence spaces, acknowledgements, windows and closing, and says what the
//! segment was (new data, a resend, the resend of data lost before the capture point).

use crate::config::MS;
use crate::conn::{Connection, RoleSource, Side};
use crate::endpoint::{At, IdOrder, Ts};
use tcpwhy_wire::{Seq, TcpSegment};

/// A lost tail is resent by a timer: a loss probe for a single segment waits at least 200 ms
/// on Linux (1.5 SRTT + the 200 ms delayed-ACK allowance), a retransmission timeout at least
/// 200 ms (300 ms on Windows). A sender quiet for less than this before a segment after an
/// IPv4 ID gap did not time anything out (another connection took the IDs: a counter shared
/// by the host, as on Windows).
const LOSS_TIMER_MIN_NS: i64 = 100 * MS;
/// Linux's tail loss probe with one segment in flight waits 2 SRTT plus TCP_RTO_MIN (200 ms)
/// (tcp_schedule_loss_probe), rounded up to the timer's tick.
const PROBE_MIN_NS: i64 = 200 * MS;

/// Two identical packets this close are one packet captured twice: on both ends of a veth or
/// on `any` microseconds apart, or a copy a bridge or router forwarded onto the captured
/// segment one hop later (7 ms apart in cs1e_hauntedbrowser.pcap). A retransmission differs
/// in its TSval once the sender's timestamp clock has ticked (1 ms on Linux, 10-500 ms on
/// other stacks), so copies told apart only by TCP timestamps are looked for this far back.
const DUPLICATE_NS: i64 = 25_000_000;

/// Copies with the same non-zero IPv4 ID are looked for this far back. Every stack gives a
/// resent segment an ID of its own (Linux: the socket's counter, Windows: the host's, BSD: the
/// next or a random one), so the same ID on the segment sent just before is the same packet
/// captured twice however late the copy (a forwarding loop, a mirror port's buffer; 60 ms
/// apart in tcpdump's bgp-infinite-loop.pcap); the window guards against an ID counter that
/// has gone round its 65 536 values, which takes a second or more at the packet rates where a
/// segment is resent with nothing else sent in between.
const DUPLICATE_ID_NS: i64 = 1_000_000_000;

/// What tells two sends of a segment apart (a retransmission differs in IP ID or TSval).
fn signature(seg: &TcpSegment) -> u32 {
    let (tsval, tsecr) = seg.options.timestamp.unwrap_or((0, 0));
    let words = [
        u64::from(seg.seq.0) << 32 | u64::from(seg.ack.0),
        u64::from(seg.payload_len) << 32 | u64::from(seg.window) << 16 | u64::from(seg.ip_id),
        u64::from(tsval) << 32 | u64::from(tsecr),
        u64::from(seg.flags.0),
    ];
    let h = words.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, w| {
        (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29)
    });
    (h ^ (h >> 32)) as u32
}

/// What a segment was, for the tracker's `SegmentEvent` (`Connection::on_segment`).
pub(crate) struct Accounted {
    /// Who sent it.
    pub side: Side,
    /// It carried data (or a SYN or FIN) beyond what its sender had sent.
    pub new_data: bool,
    /// It sent again data its sender had sent before.
    pub retransmission: bool,
    /// How long the original of data lost before the capture point waited, or 0.
    pub lost_wait_ns: i64,
    /// That loss was inferred from the timing of a probe alone (no ID gap, no hole).
    pub lost_by_timing: bool,
    /// The highest acknowledgement its sender had sent before it (`SegmentEvent`).
    pub acked_before: Option<Seq>,
    /// The connection closed with this segment for the first time: the tracker queues it
    /// among the closed ones.
    pub queue_closed: bool,
}

impl Connection {
    /// Account one segment captured at `at` (its frame `frame_len` bytes); `None` for a copy
    /// of the segment before (the same packet captured twice) or a SYN-ACK of another
    /// connection, which are counted as packets and otherwise ignored.
    #[inline(always)]
    pub(crate) fn on_segment(
        &mut self,
        seg: &TcpSegment,
        at: At,
        frame_len: u32,
    ) -> Option<Accounted> {
        let c = self;
        let mut queue_closed = false;
        c.last = at;
        // A client's SYN offers MPTCP; the server's SYN-ACK, or options after the handshake,
        // show it in use.
        if seg.options.mptcp && (seg.flags.ack() || !seg.flags.syn()) {
            c.set_mptcp();
        }
        let from_client = (seg.src, seg.src_port) == (c.client.addr, c.client.port);
        let side = if from_client {
            Side::Client
        } else {
            Side::Server
        };
        // The same packet captured twice (both ends of a veth, `any`, a bridge and its port, a
        // copy forwarded one hop later with its TTL one less): identical headers, including the
        // IPv4 ID or the TCP timestamps that tell two sends of the same bytes apart, within
        // `DUPLICATE_ID_NS` (a non-zero IPv4 ID) or `DUPLICATE_NS` of this side's last
        // segment, and the same as that segment or the one before it. Counted as a packet,
        // otherwise ignored.
        {
            let me = if from_client {
                &mut c.client
            } else {
                &mut c.server
            };
            let sig = signature(seg);
            let distinctive = seg.ip_id != 0 || seg.options.timestamp.is_some();
            let window = if seg.ip_id != 0 {
                DUPLICATE_ID_NS
            } else {
                DUPLICATE_NS
            };
            if distinctive && me.recently_sent(sig) && at.ts_ns.saturating_sub(me.last_ts) <= window
            {
                // Like tshark: packets, frame bytes and payload count every copy captured.
                me.count_duplicate(seg.payload_len);
                me.packets += 1;
                me.frame_bytes += u64::from(frame_len);
                return None;
            }
            me.note_sent(sig);
        }
        let flags = seg.flags;

        // A SYN-ACK with another ISN once the handshake completed answers another SYN (a
        // middlebox that answers SYNs, a second backend): its numbers are not this
        // connection's, so they must not redefine the server's sequence space (every later
        // segment would look resent). Counted as a packet, otherwise ignored.
        if flags.syn()
            && flags.ack()
            && side == Side::Server
            && c.handshake.ack.is_some()
            && c.server.isn().is_some_and(|isn| isn != seg.seq)
        {
            c.server.packets += 1;
            c.server.frame_bytes += u64::from(frame_len);
            return None;
        }

        // The handshake at the capture point.
        if flags.syn() && !flags.ack() && side == Side::Client && c.handshake.syn_ack.is_none() {
            c.set_syn(at);
            if c.role == RoleSource::SynAck && c.client.isn().is_none() {
                // The SYN-ACK that began the connection answered this SYN, captured after it
                // (`starts_new_generation` checked the numbers).
                c.handshake.syn_ack = Some(c.first);
                c.role = RoleSource::Syn;
            }
        }
        if flags.syn()
            && flags.ack()
            && side == Side::Server
            && c.handshake.syn_ack.is_none()
            && c.acks_client_syn(seg.ack)
        {
            c.handshake.syn_ack = Some(at);
        } else if flags.syn()
            && flags.ack()
            && side == Side::Server
            && c.handshake.ack.is_none()
            && c.first_syn_ack().is_some_and(|a| a != at)
            && c.server.isn() == Some(seg.seq)
            && (c.client.isn().is_none() || c.acks_client_syn(seg.ack))
        {
            c.handshake.note_syn_ack_again(at);
        }
        if side == Side::Client && !flags.syn() && flags.ack() && c.handshake.ack.is_none() {
            if let (Some(_), Some(isn)) = (c.handshake.syn_ack, c.server.isn()) {
                if seg.ack == isn + 1 || c.server.take_back_replaced_isn(seg.ack) {
                    c.handshake.ack = Some(at);
                }
            }
        }

        // Before the SYN-ACK, an ACK from the server side that does not acknowledge the SYN
        // belongs to earlier state on the tuple: note it, and keep its numbers out of this
        // connection's sequence space.
        let in_syn_sent = c.client.isn().is_some() && c.handshake.syn_ack.is_none();
        let mut ack_valid = flags.ack() && !flags.rst();
        if in_syn_sent
            && side == Side::Server
            && flags.ack()
            && !flags.syn()
            && c.client.isn().is_some()
            && !c.acks_client_syn(seg.ack)
        {
            c.handshake.count_invalid_ack(at);
            ack_valid = false;
        }
        if in_syn_sent && side == Side::Client && flags.rst() {
            c.handshake.count_client_rst();
        }

        // A resend of data lost before the capture point (`SegmentEvent::lost_wait_ns`): the
        // round trip it is judged against (the handshake's, else both sides' smallest data ->
        // ACK times added), and what the sender had done before this segment.
        let rtt = c.handshake_rtt_ns().unwrap_or_else(|| {
            let min = |r: &crate::endpoint::RttStats| if r.count() > 0 { r.min_ns } else { 0 };
            min(&c.client.ack_rtt) + min(&c.server.ack_rtt)
        });
        let (me, peer) = match side {
            Side::Client => (&mut c.client, &mut c.server),
            Side::Server => (&mut c.server, &mut c.client),
        };
        let my_ids = &mut c.ids[side as usize];
        // Timer-driven: neither this side nor its peer sent anything for a while (a segment
        // that follows the peer's packet at once, a window update, answers it).
        let quiet_ns = at.ts_ns - me.last_ts;
        let peer_quiet_ns = at.ts_ns - peer.last_ts;
        let acked_before = me.max_ack();
        let same_ack = acked_before == Some(seg.ack);
        let starts_at_end = me.next_seq() == Some(seg.seq);
        let ids = my_ids.order(me.packets, seg, u32::from(peer.mss().unwrap_or(1460)));
        let (had_new, retransmission, hole_age_ns) =
            me.on_send(seg, at, frame_len, peer.max_ack(), ids == IdOrder::Earlier);
        // A segment after a silence that could be a loss timer's: new data starting where the
        // sender's data ended, acknowledging nothing new (a lost tail leaves no hole).
        let after_timer = had_new
            && !retransmission
            && seg.payload_len > 0
            && same_ack
            && starts_at_end
            && quiet_ns.min(peer_quiet_ns) >= (rtt + rtt / 2).max(LOSS_TIMER_MIN_NS);
        // Without IDs (IPv6): Linux's probe for one segment in flight, 2 SRTT + 200 ms to the
        // timer's tick (up to 10 ms at HZ=100), with the peer quiet since the flight's ACKs.
        let probe = 2 * rtt + PROBE_MIN_NS;
        let probe_timed = seg.ip_id == 0
            && after_timer
            && rtt > 0
            && (probe - 4 * MS..=probe + 20 * MS).contains(&quiet_ns)
            && peer_quiet_ns >= quiet_ns - rtt;
        let mut lost_by_timing = false;
        let id_gap = match ids {
            IdOrder::Skipped(_, true) => true,
            IdOrder::Skipped(_, false) => {
                // The segment before was no data: a lost tail follows data in its flight.
                my_ids.skip_unexplained();
                false
            }
            _ => false,
        };
        // A hole filled late, unless its ID says it left before the segment that opened the
        // hole (reordered on the way, not sent again).
        let lost_wait_ns =
            if hole_age_ns > (rtt / 2).max(MS) && !retransmission && ids != IdOrder::Earlier {
                me.count_unseen_resend();
                hole_age_ns
            } else if id_gap && after_timer {
                me.count_unseen_resend();
                quiet_ns
            } else if probe_timed {
                me.count_unseen_resend();
                lost_by_timing = true;
                quiet_ns
            } else {
                if id_gap {
                    my_ids.skip_unexplained();
                }
                0
            };
        if let Some((tsval, _)) = seg.options.timestamp {
            if had_new {
                me.on_tsval(tsval, at.ts_ns);
            }
        }
        if ack_valid && me.max_ack().is_none_or(|m| seg.ack > m) {
            if let (Some(prev), 0) = (me.max_ack(), peer.packets) {
                peer.on_acked_unseen(prev, seg.ack, at.ts_ns);
            }
            me.set_max_ack(seg.ack);
            let tsecr = seg.options.timestamp.map(|t| t.1);
            // A first SACK block at or below the cumulative ACK reports a duplicate (D-SACK).
            let dsack = seg.options.sack_count > 0 && seg.options.sack_first.1 <= seg.ack;
            peer.on_acked(seg.ack, tsecr, dsack, at.ts_ns);
        }
        // Window scaling applies only when both SYNs carried the option, never to SYNs.
        if !flags.syn() && !flags.rst() {
            let scaled = match (me.window_scale(), peer.window_scale()) {
                (Some(s), Some(_)) => Some(u32::from(seg.window) << s.min(14)),
                _ if me.isn().is_some() && peer.isn().is_some() => Some(u32::from(seg.window)),
                _ => None,
            };
            me.set_window_scaled(scaled);
        }

        // Closing: RST, or FIN both ways. Packets after that keep it open a little longer.
        let closed = c.client.rst().is_some()
            || c.server.rst().is_some()
            || (c.client.fin.is_some() && c.server.fin.is_some());
        if closed && c.closed_at.is_none() {
            c.closed_at = Ts::new(at.ts_ns);
            if !c.queued_closed {
                c.queued_closed = true;
                queue_closed = true;
            }
        } else if flags.syn() && !flags.ack() && c.closed_at.is_some() && side == Side::Client {
            // The same SYN after an RST in SYN_SENT (stale-state collision): the attempt goes on.
            c.closed_at = Ts::NONE;
            c.client.clear_rst();
            c.server.clear_rst();
        }
        Some(Accounted {
            side,
            new_data: had_new,
            retransmission,
            lost_wait_ns,
            lost_by_timing,
            acked_before,
            queue_closed,
        })
    }
}
