//! # capture-loss: the capture missed packets
//!
//! **Signal.** A side acknowledged bytes the capture never saw its peer send (an ACK beyond
//! the highest sequence seen, or over a gap that was never filled). The network delivered
//! them; the capture point dropped them (a busy capturer, a mirror port, a small buffer), or
//! the file lost them after capture: excerpts merged into one file (minutes or days apart,
//! each a few packets), or a filter that kept some packets only. The packets cannot tell
//! these apart, so the finding names both.
//!
//! **Evidence.** The connection. Details: the bytes acknowledged but not captured, per side.
//!
//! **Cost.** None by itself; findings about the same connection are less certain.
//!
//! **Known false positives.** A capture that starts or ends mid-flight sees a few such bytes.
//! Connections carrying IP fragments are skipped (tcpwhy does not reassemble them).
//!
//! **References.** docs/tcp-signatures.md section 10; Wireshark's "ACKed segment that wasn't
//! captured".

use crate::{Detector, Finding, Info};
use tcpwhy_track::Connection;

pub static INFO: Info = Info {
    id: "capture-loss",
    title: "the capture missed packets (ACKs for data never seen)",
    doc: include_str!("capture_loss.rs"),
};

#[derive(Default)]
pub struct CaptureLoss;

impl Detector for CaptureLoss {
    fn info(&self) -> &'static Info {
        &INFO
    }

    fn finished(&mut self, _cs: &mut super::ConnState, c: &Connection, out: &mut Vec<Finding>) {
        let (cl, sv) = (c.client.unseen_acked_bytes(), c.server.unseen_acked_bytes());
        // IP fragments are not reassembled: their peers acknowledge bytes counted nowhere.
        if cl + sv == 0 || c.client.ip_fragments() || c.server.ip_fragments() {
            return;
        }
        let mut f = Finding::new(INFO.id, c);
        f.frames = vec![c.first.frame(), c.last.frame()];
        f.explanation = format!(
            "The capture missed data the peers acknowledged: {cl} bytes from the client and {sv} from the server; findings on this connection are less certain."
        );
        f.fix = "if the file was cut, merged from excerpts or filtered after capture, nothing was lost on the wire and nothing needs fixing; otherwise the capturer dropped packets: capture with a larger buffer (tcpdump -B), a snaplen of headers only (-s 96), on a less busy host, or filter to the traffic of interest".into();
        f.details = CaptureLossDetails {
            client_bytes_missed: cl,
            server_bytes_missed: sv,
        }
        .into();
        out.push(f);
    }
}

/// capture-loss: bytes each side sent that the peer acknowledged and the capture missed.
/// Fields in alphabetical order: the JSON object's keys, as `serde_json` objects order them.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CaptureLossDetails {
    pub client_bytes_missed: u64,
    pub server_bytes_missed: u64,
}
