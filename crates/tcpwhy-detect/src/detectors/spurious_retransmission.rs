//! # spurious-retransmission: data sent again that the receiver already had
//!
//! **Signal.** A segment is sent again although the receiver had it: the receiver's ACK for
//! it was captured before the resend, the receiver reported the resend as received twice
//! with a D-SACK block (RFC 2883), the first ACK covering it echoes a TCP timestamp the
//! sender sent before the resend (RFC 3522, Eifel: the receiver echoes the stamp of the
//! segment that filled its sequence space, so the original did; from any vantage point), or,
//! captured at the sender's side of the path, the ACK covering it came less than half a
//! round trip after the resend (too soon to answer it).
//! Nothing was lost. What fired the resend tells the cause: a retransmission timer that
//! expired before the ACK came back (a delay spike on the path, or a receiver that held its
//! ACK longer than the sender's RTO: delayed ACKs of 200 ms against a 200 ms minimum RTO),
//! duplicate ACKs from reordering, or a stack or middlebox that sends the same data twice
//! within a round trip.
//!
//! **Evidence.** The original transmission and the resend. Details: how many, how many proven
//! by D-SACK, the waits, the round trip, the cause.
//!
//! **Cost.** None by itself: the data had arrived, nobody waited for the resend. (A spurious
//! timeout does cut the sender's congestion window; a slower transfer after it shows in the
//! other findings.) These resends are not counted as loss by `rto-retransmission` or
//! `fast-retransmit`.
//!
//! **Known false positives.** An ACK captured before the resend at the receiver's side of a
//! long path may not yet have reached the sender when it resent: the resend was spurious all
//! the same (the receiver had the data), but the sender could not have known.
//!
//! **References.** RFC 2883 (D-SACK), RFC 3522 (Eifel), RFC 5682 (F-RTO); docs/tcp-signatures.md
//! section 5.

use super::resend::{evidence, Retx};
use super::{rtt_ns, side_name};
use crate::finding::{ms, ms_f};
use crate::{Finding, Info};
use tcpwhy_track::{Connection, Side};

pub static INFO: Info = Info {
    id: "spurious-retransmission",
    title: "data sent again that the receiver already had (a timer fired too early, reordering)",
    doc: include_str!("spurious_retransmission.rs"),
};

const KEEP: usize = 8;

/// One sender's spurious resends (classified once, in `retx::Retransmissions`).
#[derive(Default, Debug)]
pub(super) struct Spurious {
    seen: Vec<Retx>,
    count: u32,
    dsack: u32,
    /// Acknowledged, at the sender's side, too soon after the resend to answer it.
    too_soon: u32,
    /// Acknowledged by an ACK that echoes a timestamp from before the resend (Eifel).
    echoed: u32,
    fast: u32,
    /// Waits (original to resend), the first `KEEP`.
    waits: Vec<i64>,
}

impl Spurious {
    pub fn add(&mut self, r: Retx) {
        self.count += 1;
        self.dsack += u32::from(r.dsack);
        self.too_soon += u32::from(r.acked_too_soon && !r.dsack);
        self.echoed += u32::from(r.echoed_original && !r.dsack);
        self.fast += u32::from(r.fast);
        if r.original.is_some() && self.waits.len() < KEEP {
            self.waits.push(r.at.ts_ns - r.from_ns);
        }
        if self.seen.len() < KEEP {
            self.seen.push(r);
        }
    }

    /// Add another set of the same sender's spurious resends (those classified apart with
    /// the accept queue's).
    pub fn merge(&mut self, other: Spurious) {
        self.count += other.count;
        self.dsack += other.dsack;
        self.too_soon += other.too_soon;
        self.echoed += other.echoed;
        self.fast += other.fast;
        let room = KEEP.saturating_sub(self.waits.len());
        self.waits.extend(other.waits.into_iter().take(room));
        let room = KEEP.saturating_sub(self.seen.len());
        self.seen.extend(other.seen.into_iter().take(room));
    }

    pub fn report(&self, c: &Connection, side: Side, out: &mut Vec<Finding>) {
        let (Some(first), Some(last)) = (self.seen.first(), self.seen.last()) else {
            return;
        };
        let rtt = rtt_ns(c);
        let mut waits = self.waits.clone();
        waits.sort_unstable();
        let median = waits.get(waits.len().saturating_sub(1) / 2).copied();
        let cause = match (median, rtt) {
            (Some(w), Some(r)) if w * 2 < r => {
                "the same data was sent twice within a round trip (the sender's stack or a middlebox duplicating it)"
            }
            _ if self.fast * 2 > self.count => "duplicate ACKs from reordering announced a loss that was not one",
            (Some(_), _) => {
                "the retransmission timer fired before the ACK came back (a delay spike on the path, or the receiver delaying its ACK longer than the sender's RTO)"
            }
            (None, _) => "the receiver had the data when it was sent again",
        };
        let mut f = Finding::new(INFO.id, c);
        f.start_ns = first.from_ns;
        f.end_ns = last.at.ts_ns;
        f.cost_ns = 0;
        f.frames = evidence(&self.seen);
        f.explanation = format!(
            "{} sent data again {} time{} that the receiver already had ({} proven by D-SACK, {}{}the rest acknowledged before the resend){}: {cause}. Nothing was lost to it.",
            side_name(c, side),
            self.count,
            if self.count == 1 { "" } else { "s" },
            self.dsack,
            if self.too_soon > 0 {
                format!(
                    "{} acknowledged sooner after the resend than half a round trip, so by the original; ",
                    self.too_soon
                )
            } else {
                String::new()
            },
            if self.echoed > 0 {
                format!(
                    "{} acknowledged by an ACK that echoes the sender's timestamp from before the resend (RFC 3522), so by the original; ",
                    self.echoed
                )
            } else {
                String::new()
            },
            match (median, rtt) {
                (Some(w), Some(r)) => format!("; waits {} against a {} round trip", ms(w), ms(r)),
                (Some(w), None) => format!("; waits {}", ms(w)),
                _ => String::new(),
            }
        );
        f.fix = "nothing was lost: if timers fire early, look for delay spikes on the path or a receiver whose delayed ACK outlasts the sender's RTO (TCP_QUICKACK, a larger rto_min on that route); if reordering, a path that reorders (link bonding, multipath) and keep RACK on (net.ipv4.tcp_recovery=1)".into();
        f.details = SpuriousRetransmissionDetails {
            after_duplicate_acks: self.fast,
            cause,
            dsack: self.dsack,
            echoed_original: self.echoed,
            resends: self.count,
            rtt_ms: rtt.map(ms_f),
            sender: side.name(),
            waits_ms: waits.iter().map(|w| ms_f(*w)).collect::<Vec<_>>(),
        }
        .into();
        out.push(f);
    }
}

/// spurious-retransmission: the sender, its needless resends and why they were sent.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SpuriousRetransmissionDetails {
    pub after_duplicate_acks: u32,
    pub cause: &'static str,
    pub dsack: u32,
    /// Resends whose covering ACK echoed a timestamp from before them (RFC 3522).
    pub echoed_original: u32,
    pub resends: u32,
    pub rtt_ms: Option<f64>,
    pub sender: &'static str,
    pub waits_ms: Vec<f64>,
}
