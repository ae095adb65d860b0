//! Nagle's algorithm against the peer's delayed ACK (seed 001).

use super::*;

/// A message of `len` bytes whose first 4 bytes say its length (so the server can read it
/// whole however it was written).
fn message(len: usize) -> Vec<u8> {
    let mut m = vec![0x33u8; len.max(4)];
    m[..4].copy_from_slice(&(len.max(4) as u32).to_be_bytes());
    m
}

fn echo_server(mut s: std::net::TcpStream) {
    let mut hdr = [0u8; 4];
    while s.read_exact(&mut hdr).is_ok() {
        let len = u32::from_be_bytes(hdr) as usize;
        if len < 4 || traffic::read_n(&mut s, len - 4).ok() != Some(len - 4) {
            break;
        }
        if s.write_all(b"ok").is_err() {
            break;
        }
    }
}

/// Ping-pong `n` messages of `len` bytes written in `pieces` writes; latency per exchange.
fn ping_pong(
    s: &mut std::net::TcpStream,
    len: usize,
    pieces: usize,
    n: usize,
    stop: &AtomicBool,
) -> io::Result<Latencies> {
    let m = message(len);
    let cut = if pieces == 2 { m.len() / 2 } else { m.len() };
    let mut lat = Latencies::default();
    let mut b = [0u8; 2];
    for _ in 0..n {
        if os::interrupted(stop) {
            break;
        }
        let t0 = Instant::now();
        s.write_all(&m[..cut])?;
        if cut < m.len() {
            s.write_all(&m[cut..])?;
        }
        s.read_exact(&mut b)?;
        lat.push(t0.elapsed());
    }
    Ok(lat)
}

pub(super) fn nagle_delayed_ack(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let n = if ctx.opts.quick { 20 } else { 50 };
    let srv = server(&topo, 5000, 64, SockOpts::default(), echo_server)?;
    for (label, nodelay) in [("broken", false), ("fixed", true)] {
        ctx.check()?;
        let mut phase = Phase::new(
            label,
            "request (100-byte header + 100-byte body in two writes) to response",
        );
        phase.settings.push(format!(
            "client TCP_NODELAY {}",
            if nodelay { "on" } else { "off" }
        ));
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(5000);
        let lat = captured(ctx, &topo, "nagle-delayed-ack", &mut phase, || {
            in_ns(&topo.client, move || {
                let (mut s, _) = traffic::connect(
                    to,
                    &SockOpts {
                        nodelay,
                        ..SockOpts::default()
                    },
                )?;
                ping_pong(&mut s, 200, 2, n, &stop)
            })
        })?;
        phase.latencies = lat;
        out.phases.push(phase);
    }
    // Seed 001's method: latency against message size, one write and two writes.
    let stop = Arc::clone(&ctx.stop);
    let per = if ctx.opts.quick { 5 } else { 10 };
    let to = topo.server_addr(5000);
    let sweep = in_ns(&topo.client, move || {
        let mut rows = Vec::new();
        for pieces in [1usize, 2] {
            let (mut s, _) = traffic::connect(to, &SockOpts::default())?;
            // Leave quick-ACK mode first (the first exchanges of a connection are ACKed at once).
            ping_pong(&mut s, 64, 1, 20, &stop)?;
            for quarter in 2..=14usize {
                let len = MSS * quarter / 4;
                let l = ping_pong(&mut s, len, pieces, per, &stop)?;
                rows.push((pieces, len, l.p50().unwrap_or_default()));
            }
        }
        Ok(rows)
    })?;
    let slow: Vec<String> = sweep
        .iter()
        .filter(|(_, _, p50)| *p50 > Duration::from_millis(10))
        .map(|(w, len, p50)| {
            format!(
                "{w}-write {:.2} MSS: {:.1} ms",
                *len as f64 / MSS as f64,
                p50.as_secs_f64() * 1e3
            )
        })
        .collect();
    let one_write_slow = sweep
        .iter()
        .filter(|(w, _, p)| *w == 1 && *p > Duration::from_millis(10))
        .count();
    out.notes.push(format!(
        "size sweep 0.5..3.5 MSS ({MSS} bytes), median of {per} exchanges each: {} slow sizes ({} of them one-write){}",
        slow.len(),
        one_write_slow,
        if slow.is_empty() { String::new() } else { format!(": {}", slow.join("; ")) }
    ));
    if let Some(p) = out.phases.first_mut() {
        p.extra = json!({"size_sweep": sweep.iter().map(|(w, len, p50)| json!({"writes": w, "bytes": len, "p50_ms": crate::stats::ms(*p50)})).collect::<Vec<_>>()});
    }
    srv.stop()?;
    Ok(out)
}
