//! A deterministic synthetic capture for the scaling benchmarks: N short request/response
//! connections (10 packets each: handshake, a 100-byte request, its ACK, a 1000-byte response,
//! its ACK, FIN, FIN, ACK), about OPEN of them open at any time (their packets interleaved,
//! 10 us apart), on distinct 4-tuples (10.<a>.<b>.<c> clients, one server). Headers only
//! (snaplen 96), pcap, Ethernet, microseconds. No randomness: the same arguments give the same
//! bytes.
//!
//!     cargo run --release --example synth -- CONNECTIONS OPEN OUT.pcap [spread|idle]
//!
//! Three shapes (the packets of the first two 10 us apart):
//! - `spread` (the default): each connection's 10 packets evenly spaced over its life, so
//!   every packet finds its connection's state cold. The packets are OPEN x 10 us apart: with
//!   OPEN above about 200 000 that is more than the 2 s a closed connection waits for late
//!   packets, so the last ACK comes after it and starts a connection of its own.
//! - `idle`: the handshake and the exchange, 7 packets 100 us apart, then the connection stays
//!   open and idle, then FIN, FIN, ACK 100 us apart: a pool of persistent connections (how a
//!   host holds a million connections open). Nothing is split, and round trips stay at
//!   100-200 us, so the memory per open connection is the connections' and not their delays'.
//! - `syn`: a flood of spoofed SYNs, never answered: CONNECTIONS SYNs 10 us apart to
//!   10.255.0.1:80, each from its own made-up address and port (distinct 4-tuples), with its
//!   own ISN and IPv4 ID. Here the second number is how many times each SYN is sent, 1 s apart
//!   (its IP ID one higher each time), as a client that retries would: 1 for a spoofed flood,
//!   3 for the retry ladder's first rungs.

use std::io::{self, BufWriter, Write};

fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in data.chunks(2) {
        let v = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        s += u32::from(v);
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

struct Pkt {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    len: u16,
    /// IPv4 ID (0 in the connection shapes).
    ip_id: u16,
}

fn write_pkt(w: &mut impl Write, ts_us: u64, p: &Pkt) -> io::Result<()> {
    let mut f = [0u8; 54];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = 20 + 20 + p.len;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[18..20].copy_from_slice(&p.ip_id.to_be_bytes());
    f[20] = 0x40; // DF
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&p.src);
    f[30..34].copy_from_slice(&p.dst);
    let c = csum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&p.sport.to_be_bytes());
    f[36..38].copy_from_slice(&p.dport.to_be_bytes());
    f[38..42].copy_from_slice(&p.seq.to_be_bytes());
    f[42..46].copy_from_slice(&p.ack.to_be_bytes());
    f[46] = 0x50;
    f[47] = p.flags;
    f[48..50].copy_from_slice(&64240u16.to_be_bytes());
    let caplen = 54u32;
    let orig = 14 + u32::from(ip_len);
    w.write_all(&((ts_us / 1_000_000) as u32).to_le_bytes())?;
    w.write_all(&((ts_us % 1_000_000) as u32).to_le_bytes())?;
    w.write_all(&caplen.to_le_bytes())?;
    w.write_all(&orig.to_le_bytes())?;
    w.write_all(&f)
}

const STEPS: u64 = 10;

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if !(4..=5).contains(&args.len()) {
        usage();
    }
    let idle = match args.get(4).map(String::as_str) {
        None | Some("spread") => false,
        Some("idle") => true,
        Some("syn") => return syn_flood(&args),
        Some(_) => usage(),
    };
    let n: u64 = args[1].parse().expect("CONNECTIONS");
    let open: u64 = args[2].parse::<u64>().expect("OPEN").max(1);
    // The slot (after its first) in which a connection sends the packet of each step, so that
    // about OPEN are open at once (one starts per slot). Spread: every `gap` slots. Idle: the
    // first 7 steps in consecutive slots, the close OPEN slots after the start.
    let gap = (open / STEPS).max(1);
    let age: [u64; STEPS as usize] = std::array::from_fn(|step| {
        let step = step as u64;
        match (idle, step) {
            (false, _) => step * gap,
            (true, 0..=6) => step,
            (true, _) => open.max(STEPS) + step - 7,
        }
    });
    let mut w = pcap(&args[3])?;
    let server = [10, 255, 0, 1];
    // Connection k starts at slot k and sends each step's packet `age[step]` slots later; a
    // slot holds the packets due in it, packets 10 us apart.
    let t0: u64 = 1_700_000_000_000_000;
    let mut ts = t0;
    let total_slots = n + age[STEPS as usize - 1] + 1;
    for slot in 0..total_slots {
        // The connections with a packet in this slot: those whose age is one of `age`, one
        // per step, oldest first (scanning every start in the open window cost 10 * gap per
        // slot: days for 10 M).
        let hi = slot.min(n.saturating_sub(1));
        for step in (0..STEPS).rev() {
            let age = age[step as usize];
            if age > slot || slot - age > hi {
                continue;
            }
            let k = slot - age;
            let client = [10, (k >> 16) as u8, (k >> 8) as u8, k as u8];
            let cport = 1024 + (k % 60000) as u16;
            let (ci, si) = (
                1000u32.wrapping_add(k as u32 * 7),
                5000u32.wrapping_add(k as u32 * 13),
            );
            let c2s = |seq, ack, flags, len| Pkt {
                src: client,
                dst: server,
                sport: cport,
                dport: 80,
                seq,
                ack,
                flags,
                len,
                ip_id: 0,
            };
            let s2c = |seq, ack, flags, len| Pkt {
                src: server,
                dst: client,
                sport: 80,
                dport: cport,
                seq,
                ack,
                flags,
                len,
                ip_id: 0,
            };
            let p = match step {
                0 => c2s(ci, 0, 0x02, 0),
                1 => s2c(si, ci + 1, 0x12, 0),
                2 => c2s(ci + 1, si + 1, 0x10, 0),
                3 => c2s(ci + 1, si + 1, 0x18, 100),
                4 => s2c(si + 1, ci + 101, 0x10, 0),
                5 => s2c(si + 1, ci + 101, 0x18, 1000),
                6 => c2s(ci + 101, si + 1001, 0x10, 0),
                7 => c2s(ci + 101, si + 1001, 0x11, 0),
                8 => s2c(si + 1001, ci + 102, 0x11, 0),
                _ => c2s(ci + 102, si + 1002, 0x10, 0),
            };
            ts += 10;
            write_pkt(&mut w, ts, &p)?;
        }
    }
    w.flush()
}

/// A pcap file (microseconds, Ethernet, snaplen 96) with its header written.
fn pcap(path: &str) -> io::Result<BufWriter<std::fs::File>> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    w.write_all(&0xa1b2c3d4u32.to_le_bytes())?;
    w.write_all(&2u16.to_le_bytes())?;
    w.write_all(&4u16.to_le_bytes())?;
    w.write_all(&[0u8; 8])?;
    w.write_all(&96u32.to_le_bytes())?;
    w.write_all(&1u32.to_le_bytes())?;
    Ok(w)
}

/// The `syn` shape: `synth N SENDS OUT.pcap syn`. SYN k leaves at slot k (10 us apart) and
/// again every 100 000 slots (1 s) until it was sent SENDS times; a slot's packets are 1 us
/// apart. Addresses, ports, ISNs and IP IDs come from a 64-bit mix of k: distinct, and with
/// no pattern a tracker could lean on.
fn syn_flood(args: &[String]) -> io::Result<()> {
    let n: u64 = args[1].parse().expect("CONNECTIONS");
    let sends: u64 = args[2].parse::<u64>().expect("SENDS").clamp(1, 32);
    const SECOND: u64 = 100_000;
    let mix = |mut x: u64| {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    };
    let mut w = pcap(&args[3])?;
    let t0: u64 = 1_700_000_000_000_000;
    for slot in 0..n + (sends - 1) * SECOND {
        for send in 0..sends {
            let Some(k) = slot.checked_sub(send * SECOND).filter(|k| *k < n) else {
                continue;
            };
            let r = mix(k);
            // The address is 11.0.0.0 + k (up to 2^30 SYNs): no two SYNs share a 4-tuple.
            let src = (
                11 + ((k >> 24) as u8 & 63),
                (k >> 16) as u8,
                (k >> 8) as u8,
                k as u8,
            );
            let p = Pkt {
                src: [src.0, src.1, src.2, src.3],
                dst: [10, 255, 0, 1],
                sport: 1024 + (r % 64_000) as u16,
                dport: 80,
                seq: (r >> 32) as u32,
                ack: 0,
                flags: 0x02,
                len: 0,
                ip_id: ((r >> 16) as u16).wrapping_add(send as u16),
            };
            write_pkt(&mut w, t0 + slot * 10 + send, &p)?;
        }
    }
    w.flush()
}

fn usage() -> ! {
    eprintln!("usage: synth CONNECTIONS OPEN OUT.pcap [spread|idle]");
    eprintln!("       synth SYNS SENDS OUT.pcap syn");
    std::process::exit(2);
}
