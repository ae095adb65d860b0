//! Exchanges: in request/response traffic a request is a run of data from the client and the
//! response the run of data from the server that follows it. Every exchange gets its latency
//! (first request byte to last response byte, at the capture point) split so that the parts
//! add up to it:
//!
//! - `client`: the request's own spread, first to last request segment (the client writing
//!   it in pieces, Nagle holding a piece);
//! - `network`: the round trip from the capture point to the server and back (the handshake's
//!   SYN -> SYN-ACK part: nearly the whole RTT near the client, nearly nothing near the server);
//! - `server`: the rest of the wait for the first response byte (the server's own time), and
//!   pauses of 30 ms or more inside the response with nothing in flight and the window open
//!   (the server had nothing to send: it was still working on the answer);
//! - `retransmission`: waits of the request's and the response's retransmitted segments (a
//!   request resent is not the client's own time);
//! - `window`: time the client's window was zero during the response;
//! - `held`: a small segment held until the peer's delayed ACK (Nagle), in the request or the
//!   response: a silence of 30 ms or more ended by the peer's pure ACK that acknowledges new
//!   data and, within 2 ms, the held segment;
//! - `transfer`: the rest of the response's delivery (serialization, more round trips while the
//!   congestion window grows).

use crate::slots::{Extras, Part, WHOLE};
use tcpwhy_track::{At, Connection, SegmentEvent, Side, Ts};
use tcpwhy_wire::Seq;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub client_ns: i64,
    pub network_ns: i64,
    pub server_ns: i64,
    pub retransmission_ns: i64,
    pub window_ns: i64,
    pub held_ns: i64,
    pub transfer_ns: i64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    pub connection: u64,
    /// 1-based within the connection.
    pub index: u32,
    pub start: At,
    pub response_first: At,
    pub end: At,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub latency_ns: i64,
    pub split: Split,
}

#[derive(Default, Debug)]
pub(crate) struct State {
    req_first: Option<At>,
    req_last: Ts,
    req_bytes: u64,
    resp_first: Option<At>,
    resp_last: Option<At>,
    resp_bytes: u64,
    last_server_send: Ts,
    /// The last pure ACK of each side.
    client_ack: Ts,
    server_ack: Ts,
    /// The end of the response data sent so far (once `RESP_NXT` is set), and when the client
    /// had acknowledged all of it.
    resp_nxt: Seq,
    resp_all_acked: Ts,
    count: u32,
}

/// Time the exchange's response lost to retransmissions, a zero window, held segments and
/// server pauses, a part of the connection's `Extra` (emptied at each exchange): most
/// exchanges lose none (inline these were 48 bytes of every connection, then a pointer).
#[derive(Default, Debug)]
pub(crate) struct Delays {
    retrans_ns: i64,
    /// Waits of the request's retransmitted segments (the request being resent is lost time,
    /// not the client's own).
    req_retrans_ns: i64,
    /// Since when the client's window has been zero, and the time it was.
    zero_since: Ts,
    window_ns: i64,
    /// Held time in the request and in the response.
    held_req_ns: i64,
    held_resp_ns: i64,
    /// Pauses inside the response with nothing in flight (server time).
    pause_ns: i64,
}

/// Bits of `ConnState::exchange_has` (kept there, in padding: here they made the state 8
/// bytes longer).
const RESP_NXT: u8 = 4;
/// `ConnState::exchange_has` bit: the client's SYN carried data that the SYN-ACK did not take
/// (a Fast Open fallback), so it goes again after the handshake; set here at the SYN-ACK,
/// read by path-latency, which begins the request where it goes again.
pub(crate) const SYN_DATA_AGAIN: u8 = 0x40;

/// `ConnState::exchange_has` bit, kept for the connection's life: the server went on with a
/// response after a pause of `own_pause` or more (beyond the capture point's way to the
/// server and back) with nothing in flight, nothing held and no request since. It sends on its own schedule (a stream, server push, a timer) or answers in parts,
/// so the client's next message may be its reaction to the server's (an HTTP/2
/// WINDOW_UPDATE, a chat's receipt), not a request, and what follows it not an answer.
/// Read by server-delay and connection-reset.
pub(crate) const SERVER_OWN: u8 = 0x08;
/// The shortest pause that shows a side sending on its own schedule: 200 ms and four round
/// trips (beyond the capture point's way to the sender, which the caller takes off).
pub(crate) fn own_pause(c: &Connection) -> i64 {
    (200 * crate::model::MS).max(4 * crate::model::rtt_ns(c).unwrap_or(0))
}

/// A held segment: the sender was silent this long, then sent within RELEASE of the peer's ACK.
const HOLD_MIN: i64 = 30_000_000;
const RELEASE: i64 = 2_000_000;

fn held(prev: Ts, ack: Ts, now: At) -> i64 {
    match (prev.get(), ack.get()) {
        (Some(p), Some(a)) if a > p && now.ts_ns - p >= HOLD_MIN && now.ts_ns - a <= RELEASE => {
            a - p
        }
        _ => 0,
    }
}

/// Where the model keeps a connection's exchange: its `State` (a slot marked when looked at),
/// its bits (`RESP_NXT`, `SYN_DATA_AGAIN`, `SERVER_OWN`, kept in padding of the connection's
/// state) and the connection's rare parts, where its `Delays` live. `detectors::ConnState`
/// is the one implementation.
pub(crate) trait Place {
    /// The holder of the connection's rare parts.
    type Extra: Default;
    /// The state (marked looked at), its bits and the rare parts.
    fn exchange(&mut self) -> (&mut State, &mut u8, &mut Extras<Self::Extra>);
    /// The state taken out if it was looked at (its mark cleared), its bits and the rare parts.
    fn exchange_taken(&mut self) -> (Option<State>, &mut u8, &mut Extras<Self::Extra>);
}

/// Follows every connection's exchanges.
#[derive(Default)]
pub(crate) struct Exchanges;

impl Exchanges {
    #[inline(always)]
    pub fn segment<P: Place>(
        &mut self,
        cs: &mut P,
        c: &Connection,
        ev: &SegmentEvent<'_>,
        out: &mut Vec<Exchange>,
    ) where
        Delays: Part<P::Extra>,
    {
        let seg = ev.seg;
        // One subflow of a Multipath TCP connection: its requests' answers may travel on the
        // other subflows, so its data is no exchange (as for the timing findings).
        if c.mptcp() {
            return;
        }
        if seg.flags.syn() && !c.role.inferred() {
            // Data in the client's SYN (TCP Fast Open) is the first request when the server
            // takes it: the request begins at the SYN. A SYN-ACK that does not take it (a
            // fallback, `tfo-fallback`) leaves the request to the data sent again after the
            // handshake (its bytes are still the request's).
            let (st, has, _) = cs.exchange();
            if ev.from == Side::Client && !seg.flags.ack() && seg.payload_len > 0 {
                st.req_first = Some(ev.at);
                st.req_last = ev.at.into();
                st.req_bytes = u64::from(seg.payload_len);
            } else if ev.from == Side::Server
                && seg.flags.ack()
                && st.resp_first.is_none()
                && st.req_first.is_some_and(|q| Some(q) == c.syn())
                && c.client.isn().is_some_and(|isn| seg.ack == isn + 1)
            {
                st.req_first = None;
                st.req_last = Ts::NONE;
                *has |= SYN_DATA_AGAIN;
            }
            return;
        }
        if seg.flags.rst() || c.role.inferred() {
            return;
        }
        let (st, has, extra) = cs.exchange();
        // A zero window from the client stalls the response.
        if ev.from == Side::Client && st.resp_first.is_some() {
            if seg.window > 0 {
                if let Some(d) = extra.peek_mut::<Delays>(WHOLE) {
                    if let Some(z) = d.zero_since.take() {
                        d.window_ns += ev.at.ts_ns - z;
                    }
                }
            } else {
                let d = extra.get::<Delays>(WHOLE);
                if d.zero_since.is_none() {
                    d.zero_since = ev.at.into();
                }
            }
        }
        if seg.flags.ack() {
            // A pure ACK that acknowledges new data (a window update repeats an old one).
            let advanced = ev.acked_before.is_none_or(|m| seg.ack > m);
            if advanced && seg.payload_len == 0 && !seg.flags.fin() {
                match ev.from {
                    Side::Client => st.client_ack = ev.at.into(),
                    Side::Server => st.server_ack = ev.at.into(),
                }
            }
            if ev.from == Side::Client
                && *has & RESP_NXT != 0
                && seg.ack >= st.resp_nxt
                && st.resp_all_acked.is_none()
            {
                st.resp_all_acked = ev.at.into();
            }
        }
        // Nothing new (a keep-alive probe repeating an old byte, a copy): no request, no
        // response.
        if seg.payload_len == 0 || !(ev.new_data || ev.retransmission) {
            return;
        }
        match ev.from {
            Side::Client => {
                if st.resp_first.is_some() {
                    if let Some(x) = st.close(c, has, extra) {
                        out.push(x);
                    }
                }
                let h = held(st.req_last, st.server_ack, ev.at);
                if h != 0 {
                    extra.get::<Delays>(WHOLE).held_req_ns += h;
                }
                if ev.retransmission {
                    if let Some(prev) = st.req_last.get() {
                        extra.get::<Delays>(WHOLE).req_retrans_ns += ev.at.ts_ns - prev;
                    }
                }
                st.req_first.get_or_insert(ev.at);
                st.req_last = ev.at.into();
                if ev.new_data {
                    st.req_bytes += u64::from(seg.payload_len);
                }
            }
            Side::Server => {
                if st.req_first.is_none() {
                    return; // the server speaks first (a greeting): not a response
                }
                if st.resp_first.is_some() && !ev.retransmission {
                    let h = held(st.last_server_send, st.client_ack, ev.at);
                    if h != 0 {
                        extra.get::<Delays>(WHOLE).held_resp_ns += h;
                    }
                    let zero = extra
                        .peek::<Delays>(WHOLE)
                        .is_some_and(|d| d.zero_since.is_some());
                    // Nothing in flight, the window open, not a held segment: the server paused.
                    if let Some(idle) = st.resp_all_acked.get().filter(|_| h == 0 && !zero) {
                        // Beyond the round trip from the capture point to the server and back
                        // (the ACK travelling to the server, the data coming back).
                        let net = c.syn_to_syn_ack_ns().unwrap_or(0);
                        let pause = ev.at.ts_ns - idle - net;
                        if pause >= HOLD_MIN {
                            extra.get::<Delays>(WHOLE).pause_ns += pause;
                        }
                        if pause >= own_pause(c) {
                            *has |= SERVER_OWN;
                        }
                    }
                }
                st.resp_first.get_or_insert(ev.at);
                if ev.retransmission {
                    if let Some(prev) = st.last_server_send.get() {
                        extra.get::<Delays>(WHOLE).retrans_ns += ev.at.ts_ns - prev;
                    }
                }
                if ev.new_data {
                    st.resp_bytes += u64::from(seg.payload_len);
                    let end = seg.seq + seg.payload_len;
                    if *has & RESP_NXT == 0 || end > st.resp_nxt {
                        st.resp_nxt = end;
                        *has |= RESP_NXT;
                        st.resp_all_acked = Ts::NONE;
                    }
                }
                st.resp_last = Some(ev.at);
                st.last_server_send = ev.at.into();
            }
        }
    }

    pub fn finished<P: Place>(&mut self, cs: &mut P, c: &Connection, out: &mut Vec<Exchange>)
    where
        Delays: Part<P::Extra>,
    {
        if let (Some(mut st), has, extra) = cs.exchange_taken() {
            if let Some(x) = st.close(c, has, extra).filter(|_| !c.mptcp()) {
                out.push(x);
            }
        }
    }
}

impl State {
    /// The bytes of the request being answered (or being sent) now.
    pub(crate) fn request_bytes(&self) -> u64 {
        self.req_bytes
    }

    /// When the client last acknowledged new data with a pure ACK.
    pub(crate) fn client_ack_ns(&self) -> Option<i64> {
        self.client_ack.get()
    }

    /// The request now open (its first byte) and whether its response has begun.
    pub(crate) fn open_request(&self) -> Option<(At, bool)> {
        self.req_first.map(|r| (r, self.resp_first.is_some()))
    }

    /// Close the exchange (its lost time, in `extra`, goes with it).
    /// `has`: the state's bits of `ConnState::exchange_has`.
    fn close<E: Default>(
        &mut self,
        c: &Connection,
        has: &mut u8,
        extra: &mut Extras<E>,
    ) -> Option<Exchange>
    where
        Delays: Part<E>,
    {
        let taken = std::mem::take(self);
        let delays = extra.take::<Delays>(WHOLE);
        self.count = taken.count;
        *has &= SERVER_OWN;
        let (Some(start), Some(req_last), Some(first), Some(end)) = (
            taken.req_first,
            taken.req_last.get(),
            taken.resp_first,
            taken.resp_last,
        ) else {
            return None;
        };
        self.count += 1;
        let latency = end.ts_ns - start.ts_ns;
        let d = delays.as_deref();
        let delay = |f: fn(&Delays) -> i64| d.map_or(0, f);
        let spread = (req_last - start.ts_ns).max(0);
        let req_retrans = delay(|d| d.req_retrans_ns).min(spread);
        let held_req = delay(|d| d.held_req_ns).min(spread - req_retrans);
        let client = spread - req_retrans - held_req;
        let wait = (first.ts_ns - req_last).max(0);
        let network = c.syn_to_syn_ack_ns().unwrap_or(0).min(wait);
        let server = wait - network;
        let delivery = (end.ts_ns - first.ts_ns).max(0);
        let retransmission = delay(|d| d.retrans_ns).min(delivery) + req_retrans;
        let resp_retrans = retransmission - req_retrans;
        let window = delay(|d| d.window_ns).min(delivery - resp_retrans);
        let held_resp = delay(|d| d.held_resp_ns).min(delivery - resp_retrans - window);
        let pause = delay(|d| d.pause_ns).min(delivery - resp_retrans - window - held_resp);
        let transfer = delivery - resp_retrans - window - held_resp - pause;
        Some(Exchange {
            connection: c.id(),
            index: self.count,
            start,
            response_first: first,
            end,
            request_bytes: taken.req_bytes,
            response_bytes: taken.resp_bytes,
            latency_ns: latency,
            split: Split {
                client_ns: client,
                network_ns: network,
                server_ns: server + pause,
                retransmission_ns: retransmission,
                window_ns: window,
                held_ns: held_req + held_resp,
                transfer_ns: transfer,
            },
        })
    }
}
