//! Connections sharded over worker threads behind one reader, with the results of one thread.
//!
//! The reading thread reads the capture, counts and decodes every frame (`Frontend`), makes
//! capture time monotonic, and hands each TCP segment to the worker that owns its 4-tuple
//! (`shard_of(flow_hash)`). Work goes out in rounds of `ROUND` packets; each round also tells
//! every worker where capture time is, so that timers run out in workers that got no packets.
//!
//! Each worker runs a tracker and the detectors, and returns what they report, each record
//! keyed by the tracker's `Moment` and its order within it. Every record of a round lies
//! between the round's bounds (a packet of the round, or a timer due by its end; anything
//! later is later), so sorting the union of a round's records by key gives exactly the order
//! one tracker following every connection would have reported them in: the output is
//! byte-for-byte that of `--threads 1` (tests/it/threads.rs). The exception is the
//! `--max-connections` cap, shared among the workers: which connections a full table evicts,
//! and which finished connections a full history forgets, can differ.
//!
//! For the JSON printer the workers also write the records as JSON lines (`JsonLines`): the
//! reading thread then only copies bytes out (writing them was over a third of its time).

use crate::output::{json, JsonLines, LineOf, Printer};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use tcpwhy_detect::{Detectors, Exchange, Finding, HalfOpen, Output, Stall};
use tcpwhy_track::{
    flow_hash, shard_of, At, Brief, Config, Connection, Link, Moment, RetryWatch, Tracker,
    TrackerStats,
};
use tcpwhy_wire::TcpSegment;

/// Packets per round: small enough that a round's records are few and that the reading
/// thread, which merges the oldest round once every worker is done with it, seldom waits for
/// the one worker whose share of a round is largest (a bulk transfer's packets all go to one
/// worker); large enough that the channels are quiet. 8 Ki rounds, 16 in flight, against 32 Ki
/// and 4 (the same segments in flight): the real-traffic benchmark 0.71 -> 0.65 s (medians of
/// 6, interleaved), a SYN flood's JSON 2.58 s and 127 MB -> 1.68 s and 60 MB.
const ROUND: usize = 8 * 1024;

/// Rounds sent and not yet merged, at most. With two (of 32 Ki), the reading thread and the
/// workers (three threads on two cores, say) waited for each other whenever one of them fell
/// behind for a moment: four took the real-traffic benchmark from 1.12 to 0.97 s (a round's
/// segments were about 4.5 MB). With 8 Ki rounds, 8 in flight against 16: the same speed
/// (medians of 8 interleaved runs 0.835 and 0.865 s; 4: 0.90 s) and 11 MB less (75 -> 63 MB;
/// JSON 116 -> 94 MB): each shard's batch of a round grows to a whole round's 112-byte
/// segments when one transfer fills it, and memory touched first costs CPU on a VM.
const IN_FLIGHT: usize = 8;

/// What the records of the rounds in flight may take, about: a round of a flood (a connection
/// and a finding for each of 8 Ki packets, 15 MB of JSON lines) allows only two rounds in
/// flight; the first rounds go two at a time until one has been measured.
const IN_FLIGHT_BYTES: usize = 32 << 20;

/// One TCP segment for a worker.
struct Item {
    seg: TcpSegment,
    hash: u64,
    at: At,
    wire_len: u32,
}

enum Msg {
    /// A round's segments, where capture time is at its end, and an emptied batch of
    /// records to fill again.
    Round {
        items: Vec<Item>,
        /// Later attempts linked to refused ones (`RetryWatch`), each given to the tracker
        /// before the item at its position (at `items.len()`: after the last).
        links: Vec<(usize, Link)>,
        now: i64,
        out: Batch,
    },
    /// The capture ended: finish the next `END_PIECE` open connections, records in `out`.
    End { out: Batch },
}

/// Connections a worker finishes per piece of the end of the capture: the end's records go
/// to the reading thread piece by piece, never all at once.
const END_PIECE: usize = 4096;

/// The most JSON-line bytes an emptied batch keeps room for.
const TEXT_KEEP: usize = 4 << 20;

/// What a record is; its payload (if any) is in the batch's vector of that kind.
#[derive(Clone, Copy)]
enum Kind {
    Started,
    Finding,
    Exchange,
    Stall,
    Connection,
    /// A finished connection in brief (`Printer::briefs`).
    Brief,
    /// A record written as a JSON line (`Batch::lines`).
    Line,
}

#[derive(Clone, Copy)]
struct Key {
    moment: Moment,
    /// Order of making within the worker (within a moment, the order made).
    seq: u64,
    kind: Kind,
    /// Index into the batch's vector of `kind`.
    idx: u32,
}

impl Key {
    /// What records are ordered by (one tracker's order).
    fn order(&self) -> (Moment, u64) {
        (self.moment, self.seq)
    }
}

/// A round's records from one worker: their keys, and their payloads by kind, in vectors
/// that go back and forth between the worker and the reading thread and are used again.
/// (Records boxed one by one were allocated by the worker and freed by the reading thread:
/// glibc's arena lock then cost a futex wake-up per few records, 8% of the run.)
#[derive(Default)]
struct Batch {
    keys: Vec<Key>,
    findings: Vec<Finding>,
    exchanges: Vec<Exchange>,
    stalls: Vec<Stall>,
    connections: Vec<Connection>,
    briefs: Vec<Brief>,
    /// JSON lines (without newlines) one after the other, and where each ends and what it is.
    text: Vec<u8>,
    lines: Vec<(usize, LineOf)>,
}

impl Batch {
    fn clear(&mut self) {
        self.keys.clear();
        self.findings.clear();
        self.exchanges.clear();
        self.stalls.clear();
        self.connections.clear();
        self.briefs.clear();
        // A round's JSON lines are usually a few MB; a round of a flood (a record for each
        // of 32 Ki packets) can be 30 MB, which three batches per worker would keep for good.
        if self.text.capacity() > TEXT_KEEP {
            self.text = Vec::new();
        }
        self.text.clear();
        self.lines.clear();
    }

    /// What the records take, about (a finding's strings counted as 256 bytes).
    fn bytes(&self) -> usize {
        use std::mem::size_of;
        self.text.len()
            + self.keys.len() * size_of::<Key>()
            + self.lines.len() * size_of::<(usize, LineOf)>()
            + self.findings.len() * (size_of::<Finding>() + 256)
            + self.exchanges.len() * size_of::<Exchange>()
            + self.stalls.len() * size_of::<Stall>()
            + self.connections.len() * size_of::<Connection>()
            + self.briefs.len() * size_of::<Brief>()
    }

    /// The bytes of line `i`.
    fn line(&self, i: usize) -> Option<(&[u8], LineOf)> {
        let start = match i.checked_sub(1) {
            Some(p) => self.lines.get(p)?.0,
            None => 0,
        };
        let &(end, what) = self.lines.get(i)?;
        Some((self.text.get(start..end)?, what))
    }
}

/// A round's records from one worker, and its batch of segments to use again; `last`: the
/// worker has finished every connection (its last piece of the end).
struct Done {
    out: Batch,
    items: Vec<Item>,
    last: bool,
}

/// The detectors' output in a worker: every record keyed by the moment it was made at.
struct Collect<'a> {
    now: Moment,
    seq: u64,
    out: &'a RefCell<Batch>,
    /// Write records as JSON lines (for the JSON printer).
    json: Option<JsonLines>,
    /// Connections in brief (`Printer::briefs`).
    briefs: bool,
}

/// Where a batch keeps the payloads of one kind.
type Field<T> = fn(&mut Batch) -> &mut Vec<T>;

impl Collect<'_> {
    /// A record of `kind`, its payload (if any) pushed onto the batch's vector of that kind.
    fn record<T>(&mut self, kind: Kind, payload: Option<(T, Field<T>)>) {
        let mut b = self.out.borrow_mut();
        let idx = payload.map_or(0, |(v, vec)| {
            let vec = vec(&mut b);
            vec.push(v);
            vec.len() - 1
        });
        b.keys.push(Key {
            moment: self.now,
            seq: self.seq,
            kind,
            idx: idx as u32,
        });
        self.seq += 1;
    }

    /// A record written as a JSON line by `write`.
    fn line(&mut self, what: LineOf, write: impl FnOnce(&mut Vec<u8>)) {
        let mut b = self.out.borrow_mut();
        write(&mut b.text);
        let end = b.text.len();
        b.lines.push((end, what));
        let idx = b.lines.len() - 1;
        b.keys.push(Key {
            moment: self.now,
            seq: self.seq,
            kind: Kind::Line,
            idx: idx as u32,
        });
        self.seq += 1;
    }
}

impl Output for Collect<'_> {
    fn moment(&mut self, m: Moment) {
        // Every record of a moment comes from one worker, so a counter running over the
        // whole run orders them within their moment as well as one restarted per moment.
        self.now = m;
    }
    fn started(&mut self, _c: &Connection) {
        self.record::<()>(Kind::Started, None);
    }
    fn finding(&mut self, f: &Finding) {
        if self.json.is_some() {
            let what = LineOf::Finding {
                id: f.id,
                cost_ns: f.cost_ns,
                connection: (!f.capture_wide()).then_some(f.connection),
                low: f.confidence.level == tcpwhy_detect::Level::Low,
            };
            self.line(what, |b| json::write_finding(b, f));
        } else {
            self.finding_owned(f.clone());
        }
    }
    fn finding_owned(&mut self, f: Finding) {
        if self.json.is_some() {
            self.finding(&f);
        } else {
            self.record(Kind::Finding, Some((f, |b| &mut b.findings)));
        }
    }
    fn exchange(&mut self, x: &Exchange) {
        match self.json {
            Some(JsonLines { exchanges: true }) => {
                self.line(LineOf::Exchange, |b| json::write_exchange(b, x))
            }
            Some(_) => {}
            None => self.record(Kind::Exchange, Some((x.clone(), |b| &mut b.exchanges))),
        }
    }
    fn stall(&mut self, s: &Stall) {
        match self.json {
            Some(JsonLines { exchanges: true }) => {
                self.line(LineOf::Stall, |b| json::write_stall(b, s))
            }
            Some(_) => {}
            None => self.record(Kind::Stall, Some((s.clone(), |b| &mut b.stalls))),
        }
    }
    fn connection(&mut self, c: &Connection) {
        if self.json.is_some() {
            let what = LineOf::Connection {
                id: c.id(),
                vantage: json::vantage_index(c.vantage()) as u8,
            };
            self.line(what, |b| json::write_connection(b, c));
        } else if self.briefs {
            self.record(Kind::Brief, Some((c.brief(), |b| &mut b.briefs)));
        } else {
            self.record(Kind::Connection, Some((c.clone(), |b| &mut b.connections)));
        }
    }
}

fn worker(
    cfg: Config,
    disabled: Vec<String>,
    (json, briefs): (Option<JsonLines>, bool),
    rx: Receiver<Msg>,
    tx: Sender<Done>,
) -> (TrackerStats, Option<HalfOpen>) {
    let out = RefCell::new(Batch::default());
    let mut collect = Collect {
        now: Moment::default(),
        seq: 0,
        out: &out,
        json,
        briefs,
    };
    let mut tracker = Tracker::new(cfg);
    let mut det = Detectors::new(&disabled, &mut collect);
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Round {
                mut items,
                links,
                now,
                out: mut empty,
            } => {
                // Emptied here rather than by the reading thread: what the records own (a
                // finding's strings) was allocated here, and glibc frees another thread's
                // memory under that arena's lock (a futex wake-up every few findings).
                empty.clear();
                if links.is_empty() {
                    for it in &items {
                        tracker.segment_hashed(&it.seg, it.hash, it.at, it.wire_len, &mut det);
                    }
                } else {
                    let mut links = links.iter().peekable();
                    for (i, it) in items.iter().enumerate() {
                        while let Some((_, l)) = links.next_if(|(at, _)| *at == i) {
                            tracker.link(l, &mut det);
                        }
                        tracker.segment_hashed(&it.seg, it.hash, it.at, it.wire_len, &mut det);
                    }
                    for (_, l) in links {
                        tracker.link(l, &mut det);
                    }
                }
                tracker.advance_to(now, &mut det);
                items.clear();
                let done = Done {
                    out: out.replace(empty),
                    items,
                    last: false,
                };
                if tx.send(done).is_err() {
                    break;
                }
            }
            Msg::End { out: mut empty } => {
                empty.clear();
                let last = tracker.finish_some(END_PIECE, &mut det);
                let done = Done {
                    out: out.replace(empty),
                    items: Vec::new(),
                    last,
                };
                if tx.send(done).is_err() || last {
                    break;
                }
            }
        }
    }
    (tracker.stats().clone(), det.take_half_open())
}

/// Where the records go on the reading thread: the printer, finding ids for `--fail-on`, and
/// the count of open connections (its peak, as one tracker would have seen it).
pub struct Sinks<'a> {
    pub printer: &'a mut dyn Printer,
    pub ids: BTreeMap<&'static str, u64>,
    open: u64,
    peak_open: u64,
}

impl<'a> Sinks<'a> {
    pub fn new(printer: &'a mut dyn Printer) -> Sinks<'a> {
        Sinks {
            printer,
            ids: BTreeMap::new(),
            open: 0,
            peak_open: 0,
        }
    }

    /// A finding made on this thread (the capture-wide ones, from every worker's summary).
    pub fn finding(&mut self, f: &Finding) {
        *self.ids.entry(f.id).or_insert(0) += 1;
        self.printer.finding(f);
    }

    fn emit(&mut self, key: &Key, b: &Batch) {
        let i = key.idx as usize;
        match key.kind {
            Kind::Started => {
                self.open += 1;
                self.peak_open = self.peak_open.max(self.open);
            }
            Kind::Finding => {
                if let Some(f) = b.findings.get(i) {
                    *self.ids.entry(f.id).or_insert(0) += 1;
                    self.printer.finding(f);
                }
            }
            Kind::Exchange => {
                if let Some(x) = b.exchanges.get(i) {
                    self.printer.exchange(x);
                }
            }
            Kind::Stall => {
                if let Some(s) = b.stalls.get(i) {
                    self.printer.stall(s);
                }
            }
            Kind::Connection => {
                if let Some(c) = b.connections.get(i) {
                    self.open = self.open.saturating_sub(1);
                    self.printer.connection(c);
                }
            }
            Kind::Brief => {
                if let Some(c) = b.briefs.get(i) {
                    self.open = self.open.saturating_sub(1);
                    self.printer.brief(c);
                }
            }
            Kind::Line => {
                if let Some((bytes, what)) = b.line(i) {
                    match what {
                        LineOf::Connection { .. } => self.open = self.open.saturating_sub(1),
                        LineOf::Finding { id, .. } => *self.ids.entry(id).or_insert(0) += 1,
                        LineOf::Exchange | LineOf::Stall => {}
                    }
                    self.printer.line(bytes, what);
                }
            }
        }
    }
}

/// The workers and the reading thread's half of the work.
pub struct Engine {
    shards: usize,
    batches: Vec<Vec<Item>>,
    /// Each batch's links (`Msg::Round`), and the watch that makes them: it sees every
    /// segment in capture order, which no worker does.
    links: Vec<Vec<(usize, Link)>>,
    retries: RetryWatch,
    spare: Vec<Vec<Item>>,
    /// Emptied record batches, by worker.
    spare_out: Vec<Vec<Batch>>,
    /// The merge order of a round's records: (key, worker).
    order: Vec<(Key, u32)>,
    to: Vec<SyncSender<Msg>>,
    from: Vec<Receiver<Done>>,
    handles: Vec<JoinHandle<(TrackerStats, Option<HalfOpen>)>>,
    in_round: usize,
    in_flight: usize,
    /// Rounds allowed in flight now (2..=IN_FLIGHT, from the size of the last round's records).
    window: usize,
    /// Capture time of the TCP segments, never stepping back (see `Tracker::segment_hashed`).
    now: i64,
}

impl Engine {
    /// `workers` threads (at least 1), each with its share of `--max-connections`; `json`:
    /// the workers write the records as JSON lines (`Printer::json_lines`); `briefs`: they
    /// send connections in brief (`Printer::briefs`).
    pub fn start(
        workers: usize,
        cfg: &Config,
        disabled: &[String],
        json: Option<JsonLines>,
        briefs: bool,
    ) -> io::Result<Engine> {
        let shards = workers.max(1);
        let mut cfg = cfg.clone();
        cfg.max_connections = cfg.max_connections.div_ceil(shards).max(1);
        let mut to = Vec::new();
        let mut from = Vec::new();
        let mut handles = Vec::new();
        for i in 0..shards {
            let (in_tx, in_rx) = sync_channel(IN_FLIGHT);
            let (out_tx, out_rx) = channel();
            let (cfg, disabled) = (cfg.clone(), disabled.to_vec());
            let h = std::thread::Builder::new()
                .name(format!("tcpwhy-worker-{i}"))
                .spawn(move || worker(cfg, disabled, (json, briefs), in_rx, out_tx))?;
            to.push(in_tx);
            from.push(out_rx);
            handles.push(h);
        }
        Ok(Engine {
            shards,
            batches: (0..shards).map(|_| Vec::new()).collect(),
            links: (0..shards).map(|_| Vec::new()).collect(),
            retries: RetryWatch::new(&cfg),
            spare: Vec::new(),
            spare_out: (0..shards).map(|_| Vec::new()).collect(),
            order: Vec::new(),
            to,
            from,
            handles,
            in_round: 0,
            in_flight: 0,
            window: 2,
            now: i64::MIN,
        })
    }

    /// One TCP segment (frame number, capture time, length on the wire).
    pub fn segment(
        &mut self,
        seg: &TcpSegment,
        frame: u64,
        ts_ns: i64,
        wire_len: u32,
        sinks: &mut Sinks<'_>,
    ) -> io::Result<()> {
        // Only TCP segments move the trackers' clock (as for one tracker fed by `Analyzer`):
        // a later frame of another protocol must not expire connections or clamp times.
        self.now = self.now.max(ts_ns);
        let at = At::new(frame, self.now);
        for l in self.retries.segment(seg, at) {
            let k = shard_of(l.hash(), self.shards);
            self.links[k].push((self.batches[k].len(), *l));
        }
        let hash = flow_hash(seg);
        let k = shard_of(hash, self.shards);
        self.batches[k].push(Item {
            seg: *seg,
            hash,
            at,
            wire_len,
        });
        self.in_round += 1;
        if self.in_round >= ROUND {
            self.send_round()?;
            // The workers track the rounds in flight while this thread reads the next.
            if self.in_flight >= self.window {
                self.collect_round(sinks)?;
            }
        }
        Ok(())
    }

    fn send_round(&mut self) -> io::Result<()> {
        for k in 0..self.shards {
            let fresh = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(ROUND / self.shards + 64));
            let items = std::mem::replace(&mut self.batches[k], fresh);
            let links = std::mem::take(&mut self.links[k]);
            let out = self.spare_out[k].pop().unwrap_or_default();
            self.to[k]
                .send(Msg::Round {
                    items,
                    links,
                    now: self.now,
                    out,
                })
                .map_err(|_| worker_gone())?;
        }
        self.in_round = 0;
        self.in_flight += 1;
        Ok(())
    }

    /// The oldest round's records from every worker, in one tracker's order.
    fn collect_round(&mut self, sinks: &mut Sinks<'_>) -> io::Result<()> {
        let mut outs = Vec::with_capacity(self.from.len());
        for rx in &self.from {
            let done = rx.recv().map_err(|_| worker_gone())?;
            outs.push(done.out);
            if done.items.capacity() > 0 {
                self.spare.push(done.items);
            }
        }
        self.in_flight -= 1;
        // Keys are unique across workers (a moment is a packet, or a timer or the end of one
        // connection: each belongs to one worker), so the order is total.
        self.order.clear();
        merge_keys(&outs, &mut self.order);
        for (k, w) in &self.order {
            if let Some(out) = outs.get(*w as usize) {
                sinks.emit(k, out);
            }
        }
        let bytes: usize = outs.iter().map(Batch::bytes).sum();
        self.window = (IN_FLIGHT_BYTES / bytes.max(1)).clamp(2, IN_FLIGHT);
        for (w, out) in outs.into_iter().enumerate() {
            // (The worker empties it: see `worker`. Batches beyond the window are let go.)
            if let Some(spare) = self.spare_out.get_mut(w) {
                if spare.len() < self.window {
                    spare.push(out);
                }
            }
        }
        sinks.printer.check()
    }

    /// The end of the capture: every round, then every connection still open, then the
    /// capture-wide findings (from the workers' summaries, merged: what one worker that saw
    /// every connection would have found), then the trackers' counters (peak open as one
    /// tracker would have counted it).
    pub fn finish(mut self, sinks: &mut Sinks<'_>) -> io::Result<TrackerStats> {
        if self.in_round > 0 {
            self.send_round()?;
        }
        while self.in_flight > 0 {
            self.collect_round(sinks)?;
        }
        self.finish_connections(sinks)?;
        let mut stats = TrackerStats::default();
        let mut half_open: Option<HalfOpen> = None;
        for h in self.handles.drain(..) {
            let (s, summary) = h.join().map_err(|_| worker_gone())?;
            stats.connections += s.connections;
            stats.evicted += s.evicted;
            stats.history_forgotten += s.history_forgotten;
            match (&mut half_open, summary) {
                (Some(all), Some(one)) => all.merge(one),
                (all @ None, one) => *all = one,
                (Some(_), None) => {}
            }
        }
        for f in half_open.iter().flat_map(HalfOpen::findings) {
            sinks.finding(&f);
        }
        sinks.printer.check()?;
        stats.peak_open = sinks.peak_open;
        Ok(stats)
    }

    /// The end of the capture: each worker finishes its open connections piece by piece, and
    /// the pieces are merged as they come, so a worker holds at most two pieces at a time
    /// (the one being merged, and the next, which it makes meanwhile).
    fn finish_connections(&mut self, sinks: &mut Sinks<'_>) -> io::Result<()> {
        let n = self.shards;
        let mut outs: Vec<Batch> = (0..n).map(|_| Batch::default()).collect();
        let mut pos = vec![0usize; n];
        // A piece asked for and not yet received (false once the worker sent its last).
        let mut asked = vec![true; n];
        for tx in &self.to {
            tx.send(Msg::End {
                out: Batch::default(),
            })
            .map_err(|_| worker_gone())?;
        }
        loop {
            // Every worker has records left in its piece, or has sent its last.
            for w in 0..n {
                while pos[w] >= outs[w].keys.len() && asked[w] {
                    let done = self.from[w].recv().map_err(|_| worker_gone())?;
                    let spare = std::mem::replace(&mut outs[w], done.out);
                    pos[w] = 0;
                    asked[w] = !done.last;
                    if asked[w] {
                        // Its next piece while this one is merged.
                        self.to[w]
                            .send(Msg::End { out: spare })
                            .map_err(|_| worker_gone())?;
                    }
                }
            }
            let Some((w, k)) = smallest(&outs, &pos) else {
                break;
            };
            pos[w] += 1;
            sinks.emit(&k, &outs[w]);
            if pos[w] == outs[w].keys.len() {
                sinks.printer.check()?;
            }
        }
        sinks.printer.check()
    }
}

/// The union of the workers' keys, in key order. A worker makes its keys in its tracker's
/// order, which is key order, so a merge of the sorted lists does (a sort of the union was 2%
/// of the reading thread); a list out of order would fall back to sorting the union.
fn merge_keys(outs: &[Batch], order: &mut Vec<(Key, u32)>) {
    let sorted = outs
        .iter()
        .all(|o| o.keys.windows(2).all(|w| w[0].order() < w[1].order()));
    if !sorted {
        for (w, out) in outs.iter().enumerate() {
            order.extend(out.keys.iter().map(|&k| (k, w as u32)));
        }
        order.sort_unstable_by_key(|(k, _)| k.order());
        return;
    }
    let mut pos = vec![0usize; outs.len()];
    while let Some((w, k)) = smallest(outs, &pos) {
        pos[w] += 1;
        order.push((k, w as u32));
    }
}

/// The worker whose next key (at `pos[w]` in its batch) comes first, and that key.
fn smallest(outs: &[Batch], pos: &[usize]) -> Option<(usize, Key)> {
    let mut best: Option<(usize, Key)> = None;
    for (w, o) in outs.iter().enumerate() {
        if let Some(k) = pos.get(w).and_then(|&p| o.keys.get(p)) {
            if best.is_none_or(|(_, b)| k.order() < b.order()) {
                best = Some((w, *k));
            }
        }
    }
    best
}

fn worker_gone() -> io::Error {
    io::Error::other("a worker thread stopped unexpectedly")
}
