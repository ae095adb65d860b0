//! # tcpwhy-detect: name the cause of every slow exchange
//!
//! Detectors are independent units (one file each under `detectors/`, each opening with its
//! documentation: signal, evidence, known false positives, references). They watch every
//! segment and every finished connection the tracker reports, and emit [`Finding`]s: a stable
//! kebab-case id, the connection, when, what it cost, the evidence frames, an explanation
//! with the numbers, and the fix. `tcpwhy explain ID` prints a detector's documentation.
//!
//! Architecture invariant: detectors see only what the tracker reports (segments with their
//! connection, finished connections) and capture time; no I/O, no clock; the same packets give
//! the same findings in the same order with any number of threads.
//!
//! Inside, each layer uses only those below it: `slots` (the containers a connection's states
//! live in) <- `model` (the exchange and stall models, the round trip) <- `detectors` (the
//! registry, `ConnState`, one file per detector) <- this file (the driver, [`Detectors`]). A
//! model reaches its state through a trait of its own (`model::exchange::Place`), which
//! `ConnState` implements, so it names no detector.
//!
//! A finding's cause-specific facts are typed ([`Details`]: one struct per detector, declared
//! beside it, its fields in the alphabetical order of the JSON keys they serialize as);
//! printers read them through their types, never by key, and this crate writes no JSON.
#![forbid(unsafe_code)]

pub mod confidence;
pub mod detectors;
pub use detectors::ConnState;
mod finding;
mod half_open;
mod model;
mod slots;

pub use half_open::HalfOpen;

pub use model::exchange::{Exchange, Split};
pub use model::stall::{Stall, StallClass, FLOOR_NS as STALL_FLOOR_NS};

pub use finding::{Confidence, Details, Finding, Level};
use tcpwhy_track::{Connection, SegmentEvent, Sink};

/// What `tcpwhy explain` shows, and what the registry lists.
pub struct Info {
    pub id: &'static str,
    pub title: &'static str,
    /// The detector's documentation (its file's opening comment).
    pub doc: &'static str,
}

pub trait Detector {
    fn info(&self) -> &'static Info;
    /// Further ids this detector emits (one classification feeding several findings).
    fn also(&self) -> &'static [&'static Info] {
        &[]
    }
    /// Stop emitting `id` (one of `info()` and `also()`).
    fn disable(&mut self, _id: &str) {}
    /// Every segment of every connection, after the tracker accounted it. The detector keeps
    /// what it needs about the connection in its own field of `cs`.
    fn segment(
        &mut self,
        _cs: &mut ConnState,
        _c: &Connection,
        _ev: &SegmentEvent<'_>,
        _out: &mut Vec<Finding>,
    ) {
    }
    /// A stall the transfer model found (a gap without progress, classified).
    fn stall(&mut self, _cs: &mut ConnState, _c: &Connection, _s: &Stall, _out: &mut Vec<Finding>) {
    }
    /// A later attempt linked to this connection after it was refused
    /// (`tcpwhy_track::RetryWatch`): the client's next try from a new port, or its peer's
    /// connection to it.
    fn linked(&mut self, _cs: &mut ConnState, _c: &Connection, _link: &tcpwhy_track::Link) {}
    /// The connection is finished: emit what is pending and take its state out of `cs`.
    fn finished(&mut self, _cs: &mut ConnState, _c: &Connection, _out: &mut Vec<Finding>) {}
}

/// Every detector, in the order they run.
pub fn registry() -> Vec<Box<dyn Detector>> {
    detectors::all()
}

/// The documentation of every detector, for `tcpwhy explain`: the per-connection ones, then
/// the capture-wide findings.
pub fn infos() -> Vec<&'static Info> {
    registry()
        .iter()
        .flat_map(|d| std::iter::once(d.info()).chain(d.also().iter().copied()))
        .chain(detectors::CAPTURE_WIDE.iter().copied())
        .collect()
}

/// Receives findings and finished connections, in that order for each connection.
pub trait Output {
    fn finding(&mut self, f: &Finding);
    /// A finding handed over (an output that keeps findings takes it without a copy).
    fn finding_owned(&mut self, f: Finding) {
        self.finding(&f);
    }
    fn connection(&mut self, c: &Connection);
    /// A finished request/response exchange (before its connection's record).
    fn exchange(&mut self, _x: &Exchange) {}
    /// A stall in a transfer (before the record of its connection).
    fn stall(&mut self, _s: &Stall) {}
    /// The first write error so far (a closed pipe stops the run early).
    fn check(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// The tracker's moment (see `tcpwhy_track::Moment`): records that follow happen then.
    fn moment(&mut self, _m: tcpwhy_track::Moment) {}
    /// A connection started.
    fn started(&mut self, _c: &Connection) {}
}

/// The findings about the application's own timing (its requests, responses and pauses, a
/// reset of work in progress) that one subflow of a Multipath TCP connection cannot tell: the
/// application's data may travel on its other subflows (a reply on another subflow is no
/// server delay on this one, a subflow reset no lost work). Not made on MPTCP subflows.
pub const SUBFLOW_BLIND: [&str; 4] = [
    "server-delay",
    "client-delay",
    "sender-limited",
    "connection-reset",
];

/// The findings that read one side's data as an answer to the other's, or its pauses as owed
/// data: not made between peers of a protocol whose speakers send on their own schedule.
pub const PEER_BLIND: [&str; 3] = ["server-delay", "client-delay", "sender-limited"];

/// Well-known ports of protocols whose two speakers are peers: after the session opens, each
/// sends its messages when its own state changes (a route, a label, a peer's status), and no
/// message answers another, so one side's data after the other's is no reply and a pause is no
/// debt. BGP (179, RFC 4271: UPDATEs whenever routes change, KEEPALIVEs on each side's timer),
/// LDP (646, RFC 5036), MSDP (639, RFC 3618), BMP (11019, RFC 7854: a router's one-way feed).
pub const PEER_PROTOCOL_PORTS: [(u16, &str); 4] =
    [(179, "BGP"), (646, "LDP"), (639, "MSDP"), (11019, "BMP")];

/// `c` speaks a peer protocol, by either side's port (`PEER_PROTOCOL_PORTS`).
fn peer_protocol(c: &Connection) -> bool {
    PEER_PROTOCOL_PORTS
        .iter()
        .any(|(p, _)| *p == c.server.port || *p == c.client.port)
}

/// On an MPTCP subflow, drop the findings of `SUBFLOW_BLIND` from `found`; between the peers of
/// a peer protocol, those of `PEER_BLIND`.
fn drop_blind(c: &Connection, found: &mut Vec<Finding>) {
    if c.mptcp() {
        found.retain(|f| !SUBFLOW_BLIND.contains(&f.id));
    }
    if peer_protocol(c) {
        found.retain(|f| !PEER_BLIND.contains(&f.id));
    }
}

/// The detectors between the tracker and an output: a [`Sink`] for the tracker.
pub struct Detectors<'a> {
    set: detectors::Set,
    out: &'a mut dyn Output,
    buf: Vec<Finding>,
    exchanges: model::exchange::Exchanges,
    xbuf: Vec<Exchange>,
    stalls: model::stall::Stalls,
    sbuf: Vec<Stall>,
    states: detectors::States,
    /// The tracker's latest moment, passed on only before a record (the output sees the
    /// moment of every record, not a call per packet).
    moment: tcpwhy_track::Moment,
    /// Every half-open attempt, summed for the capture-wide findings (none when both are
    /// disabled); and when the capture ended (`Sink::capture_end`).
    half_open: Option<HalfOpen>,
    end_ns: i64,
}

impl<'a> Detectors<'a> {
    /// All registered detectors except the ids in `disabled`.
    pub fn new(disabled: &[String], out: &'a mut dyn Output) -> Detectors<'a> {
        let on = |info: &Info| !disabled.iter().any(|d| d == info.id);
        let (flood, scan) = (
            on(&detectors::syn_flood::INFO),
            on(&detectors::syn_scan::INFO),
        );
        Detectors {
            set: detectors::Set::new(disabled),
            out,
            buf: Vec::new(),
            exchanges: Default::default(),
            xbuf: Vec::new(),
            stalls: Default::default(),
            sbuf: Vec::new(),
            states: Default::default(),
            moment: Default::default(),
            half_open: (flood || scan).then(|| HalfOpen::new(flood, scan)),
            end_ns: i64::MAX,
        }
    }

    /// The summary of the half-open attempts seen so far, for the capture-wide findings
    /// (`HalfOpen::findings`, after merging every worker's); none when they are disabled.
    pub fn take_half_open(&mut self) -> Option<HalfOpen> {
        self.half_open.take()
    }

    pub fn check(&mut self) -> std::io::Result<()> {
        self.out.check()
    }

    fn flush(&mut self) {
        self.out.moment(self.moment);
        for f in self.buf.drain(..) {
            self.out.finding_owned(f);
        }
        for x in self.xbuf.drain(..) {
            self.out.exchange(&x);
        }
        for s in self.sbuf.drain(..) {
            self.out.stall(&s);
        }
    }
}

impl Sink for Detectors<'_> {
    fn moment(&mut self, m: tcpwhy_track::Moment) {
        self.moment = m;
    }

    fn capture_end(&mut self, ts_ns: i64) {
        self.end_ns = ts_ns;
    }

    fn started(&mut self, c: &Connection) {
        self.out.moment(self.moment);
        self.out.started(c);
    }

    fn segment(&mut self, c: &Connection, ev: &SegmentEvent<'_>) {
        let cs = self.states.get(c);
        self.set.segment(cs, c, ev, &mut self.buf);
        self.exchanges.segment(cs, c, ev, &mut self.xbuf);
        self.stalls.segment(cs, c, ev, &mut self.sbuf);
        for s in &self.sbuf {
            self.set.stall(cs, c, s, &mut self.buf);
        }
        if !self.buf.is_empty() || !self.xbuf.is_empty() || !self.sbuf.is_empty() {
            drop_blind(c, &mut self.buf);
            self.flush();
        }
    }

    fn linked(&mut self, c: &Connection, link: &tcpwhy_track::Link) {
        let cs = self.states.get(c);
        self.set.linked(cs, c, link);
    }

    fn connection(&mut self, c: &Connection) {
        let cs = self.states.get(c);
        self.set.finished(cs, c, &mut self.buf);
        drop_blind(c, &mut self.buf);
        for f in &mut self.buf {
            confidence::assess(c, f);
        }
        self.exchanges.finished(cs, c, &mut self.xbuf);
        self.stalls.finished(cs);
        self.states.release(c);
        self.buf
            .sort_by_key(|f| (f.start_ns, f.frames.first().copied()));
        self.flush();
        self.out.connection(c);
        if let Some(h) = &mut self.half_open {
            // When it finished: at a packet or a timer, or (phase 2) when the capture ended.
            let at = if self.moment.phase == 2 {
                self.end_ns
            } else {
                self.moment.ts_ns
            };
            h.connection(c, at);
        }
    }
}

#[cfg(test)]
mod tests;
