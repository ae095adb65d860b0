//! The NFQUEUE netlink protocol: messages built and parsed (pure).

// NFQUEUE netlink protocol (linux/netlink.h, linux/netfilter/nfnetlink_queue.h). Netlink
// headers are in host byte order, nfnetlink payloads in network byte order.

pub(super) const NLMSG_HDRLEN: usize = 16;
pub(super) const NFGEN_HDRLEN: usize = 4;
pub(super) const NLMSG_ERROR: u16 = 2;
pub(super) const NLM_F_REQUEST: u16 = 1;
pub(super) const NLM_F_ACK: u16 = 4;
pub(super) const NFNL_SUBSYS_QUEUE: u16 = 3;
pub(super) const NFQNL_MSG_PACKET: u16 = NFNL_SUBSYS_QUEUE << 8;
pub(super) const NFQNL_MSG_VERDICT: u16 = (NFNL_SUBSYS_QUEUE << 8) | 1;
pub(super) const NFQNL_MSG_CONFIG: u16 = (NFNL_SUBSYS_QUEUE << 8) | 2;
pub(super) const NFQNL_MSG_VERDICT_BATCH: u16 = (NFNL_SUBSYS_QUEUE << 8) | 3;
pub(super) const NFQA_PACKET_HDR: u16 = 1;
pub(super) const NFQA_VERDICT_HDR: u16 = 2;
pub(super) const NFQA_PAYLOAD: u16 = 10;
pub(super) const NFQA_CAP_LEN: u16 = 13;
pub(super) const NFQA_CFG_CMD: u16 = 1;
pub(super) const NFQA_CFG_PARAMS: u16 = 2;
pub(super) const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
pub(super) const NFQA_CFG_MASK: u16 = 4;
pub(super) const NFQA_CFG_FLAGS: u16 = 5;
pub(super) const NFQNL_CFG_CMD_BIND: u8 = 1;
pub(super) const NFQNL_COPY_PACKET: u8 = 2;
pub(super) const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
pub(super) const NFQA_CFG_F_GSO: u32 = 4;
pub(super) const NLA_TYPE_MASK: u16 = 0x3fff;
/// Kernel verdict codes (linux/netfilter.h).
pub const NF_DROP: u32 = 0;
pub const NF_ACCEPT: u32 = 1;

pub(super) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

pub(super) fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(super) fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(super) fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Appends nlmsghdr + nfgenmsg; returns the message start for [`end_msg`].
pub(super) fn begin_msg(
    out: &mut Vec<u8>,
    msg_type: u16,
    flags: u16,
    seq: u32,
    queue: u16,
) -> usize {
    let start = out.len();
    out.extend_from_slice(&0u32.to_ne_bytes()); // length, patched by end_msg
    out.extend_from_slice(&msg_type.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    out.extend_from_slice(&[0, 0]); // AF_UNSPEC, NFNETLINK_V0
    out.extend_from_slice(&queue.to_be_bytes());
    start
}

pub(super) fn put_attr(out: &mut Vec<u8>, attr_type: u16, data: &[u8]) {
    out.extend_from_slice(&((4 + data.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&attr_type.to_ne_bytes());
    out.extend_from_slice(data);
    out.resize(align4(out.len()), 0);
}

pub(super) fn end_msg(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

/// The one config message: bind the queue, copy `copy_range` bytes of each packet, raise the
/// queue length, fail-open and GSO off. Asks for an ACK.
pub(super) fn config_msg(out: &mut Vec<u8>, seq: u32, queue: u16, copy_range: u32, max_len: u32) {
    let start = begin_msg(out, NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, queue);
    put_attr(out, NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0]);
    let mut params = copy_range.to_be_bytes().to_vec();
    params.push(NFQNL_COPY_PACKET);
    put_attr(out, NFQA_CFG_PARAMS, &params);
    put_attr(out, NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes());
    // Fail-open OFF: with it on, a packet that finds the queue (or our socket buffer) full is
    // forwarded at once, overtaking the held ones and escaping delay and drop rules, which
    // silently breaks a scenario. Off, such a packet is dropped, which TCP sees as ordinary
    // congestion loss and the kernel counts (reported as kernel_*_dropped). The queue length
    // (65536) and socket buffer (32 MB) keep that from happening at lab rates.
    // GSO OFF (the default, made explicit): the kernel segments GSO packets before queueing,
    // so drop rules count and drop individual MSS-sized segments as a real link would.
    put_attr(out, NFQA_CFG_FLAGS, &0u32.to_be_bytes());
    put_attr(
        out,
        NFQA_CFG_MASK,
        &(NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO).to_be_bytes(),
    );
    end_msg(out, start);
}

/// Appends a verdict for one packet (`batch`: for every queued packet up to `id`).
pub(super) fn verdict_msg(
    out: &mut Vec<u8>,
    seq: u32,
    queue: u16,
    id: u32,
    verdict: u32,
    batch: bool,
) {
    let msg_type = if batch {
        NFQNL_MSG_VERDICT_BATCH
    } else {
        NFQNL_MSG_VERDICT
    };
    let start = begin_msg(out, msg_type, NLM_F_REQUEST, seq, queue);
    let mut hdr = [0u8; 8];
    hdr[..4].copy_from_slice(&verdict.to_be_bytes());
    hdr[4..].copy_from_slice(&id.to_be_bytes());
    put_attr(out, NFQA_VERDICT_HDR, &hdr);
    end_msg(out, start);
}

/// One message of a datagram read from the netlink socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NlEvent<'a> {
    /// A queued packet: its id, the copied bytes, and its full length.
    Packet {
        id: u32,
        data: &'a [u8],
        wire_len: u32,
    },
    /// An NLMSG_ERROR: `errno` 0 is an ACK for request `seq`.
    Ack { seq: u32, errno: i32 },
    /// Something unusable (bad lengths, packet without header); counted, ignored.
    Garbage,
    /// A message type we do not use.
    Other,
}

/// Calls `on` for each netlink message in `buf`. Never panics, whatever the bytes.
pub fn parse_datagram<'a>(buf: &'a [u8], mut on: impl FnMut(NlEvent<'a>)) {
    let mut off = 0;
    while buf.len().saturating_sub(off) >= NLMSG_HDRLEN {
        let (Some(len), Some(msg_type)) = (ne_u32(buf, off), ne_u16(buf, off + 4)) else {
            break;
        };
        let len = len as usize;
        let Some(msg) = buf.get(off..off.saturating_add(len)) else {
            on(NlEvent::Garbage);
            return;
        };
        if len < NLMSG_HDRLEN {
            on(NlEvent::Garbage);
            return;
        }
        on(parse_msg(msg, msg_type));
        off = off.saturating_add(align4(len));
    }
}

pub(super) fn parse_msg(msg: &[u8], msg_type: u16) -> NlEvent<'_> {
    match msg_type {
        NLMSG_ERROR => match (ne_u32(msg, NLMSG_HDRLEN), ne_u32(msg, NLMSG_HDRLEN + 12)) {
            // struct nlmsgerr { int error; struct nlmsghdr msg; }: seq is at 8 in that header.
            (Some(err), Some(seq)) => NlEvent::Ack {
                seq,
                errno: (err as i32).saturating_abs(),
            },
            _ => NlEvent::Garbage,
        },
        NFQNL_MSG_PACKET => {
            let mut id = None;
            let mut data: &[u8] = &[];
            let mut cap_len = None;
            let mut off = NLMSG_HDRLEN + NFGEN_HDRLEN;
            while let (Some(alen), Some(atype)) = (ne_u16(msg, off), ne_u16(msg, off + 2)) {
                let alen = usize::from(alen);
                let Some(body) = msg.get(off + 4..off + alen.max(4)) else {
                    break;
                };
                if alen < 4 {
                    break;
                }
                match atype & NLA_TYPE_MASK {
                    NFQA_PACKET_HDR => id = be_u32(body, 0),
                    NFQA_PAYLOAD => data = body,
                    NFQA_CAP_LEN => cap_len = be_u32(body, 0),
                    _ => {}
                }
                off += align4(alen);
            }
            match id {
                Some(id) => NlEvent::Packet {
                    id,
                    data,
                    wire_len: cap_len.unwrap_or(data.len() as u32).max(data.len() as u32),
                },
                None => NlEvent::Garbage,
            }
        }
        _ => NlEvent::Other,
    }
}
