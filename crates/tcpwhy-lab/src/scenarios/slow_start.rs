//! Slow start restarted after idle (seed 002).

use super::*;

/// Server -> client data flights in a capture: segments of `mss` bytes per burst (a
/// super-segment of a capture with offloads counts by its bytes), bursts split by gaps over
/// `gap_ms`. Returns the bursts of each period after an idle gap over `idle_ms`.
fn flights_after_idle(
    path: &std::path::Path,
    server_port: u16,
    mss: u32,
    idle_ms: i64,
    gap_ms: i64,
) -> io::Result<Vec<Vec<u32>>> {
    let p = path.to_string_lossy().into_owned();
    let mut cap = tcpwhy_capture::Capture::open(&[p]).map_err(io::Error::other)?;
    let mut bursts: Vec<Vec<u32>> = Vec::new();
    let mut last: Option<i64> = None;
    let mut cur: Option<u32> = None;
    while let Some(pkt) = cap.next().map_err(io::Error::other)? {
        let Ok(tcpwhy_wire::Decoded::Tcp(seg)) =
            tcpwhy_wire::decode(pkt.link, pkt.data, pkt.orig_len)
        else {
            continue;
        };
        if seg.src_port != server_port || seg.payload_len == 0 {
            continue;
        }
        let segs = seg.payload_len.div_ceil(mss.max(1));
        let gap = last.map_or(i64::MAX, |t| (pkt.ts_ns - t) / 1_000_000);
        last = Some(pkt.ts_ns);
        if gap > idle_ms {
            if let Some(c) = cur.take() {
                if let Some(b) = bursts.last_mut() {
                    b.push(c)
                }
            }
            bursts.push(Vec::new());
            cur = Some(segs);
        } else if gap > gap_ms {
            if let Some(c) = cur.take() {
                if let Some(b) = bursts.last_mut() {
                    b.push(c)
                }
            }
            cur = Some(segs);
        } else {
            cur = Some(cur.unwrap_or(0) + segs);
        }
    }
    if let (Some(c), Some(b)) = (cur, bursts.last_mut()) {
        b.push(c);
    }
    Ok(bursts)
}

pub(super) fn slow_start_after_idle(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    // The gap must be several RTOs (~250 ms here): cwnd halves once per RTO of idle down to the
    // initial window (tcp_cwnd_restart), so 1 s leaves it at 1/16, 3 s at the initial window.
    let (responses, gap) = if ctx.opts.quick { (2, 3.0) } else { (5, 3.0) };
    const RESPONSE: usize = 1 << 20;
    for (pi, (label, ssai, cc)) in [
        ("broken", "1", "cubic"),
        ("fixed", "0", "cubic"),
        ("bbr", "1", "bbr"),
    ]
    .into_iter()
    .enumerate()
    {
        ctx.check()?;
        topo.sysctl(&topo.server, "net.ipv4.tcp_slow_start_after_idle", ssai)?;
        let mut phase = Phase::new(label, "1 MB response after an idle gap");
        phase.settings.push(format!(
            "server net.ipv4.tcp_slow_start_after_idle={ssai}, TCP_CONGESTION {cc}"
        ));
        phase.settings.push(format!(
            "50 ms RTT (25 ms each way in the router), {responses} responses {gap} s apart"
        ));
        let port = 5000 + pi as u16;
        let srv = server(
            &topo,
            port,
            16,
            SockOpts {
                congestion: Some(cc),
                ..SockOpts::default()
            },
            |mut s| {
                let mut b = [0u8; 1];
                while matches!(s.read(&mut b), Ok(1)) {
                    if traffic::write_zeros(&mut s, RESPONSE).is_err() {
                        break;
                    }
                }
            },
        )?;
        let emu = start_emulator(
            &topo,
            EmulatorConfig {
                queue: 0,
                delay: Duration::from_millis(25),
                drops: Vec::new(),
            },
        )?;
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(port);
        let lat = captured(ctx, &topo, "slow-start-after-idle", &mut phase, || {
            in_ns(&topo.client, move || {
                let mut lat = Latencies::default();
                let (mut s, _) = traffic::connect(to, &SockOpts::default())?;
                for r in 0..=responses {
                    if os::interrupted(&stop) {
                        break;
                    }
                    if r > 0 {
                        std::thread::sleep(Duration::from_secs_f64(gap));
                    }
                    let t0 = Instant::now();
                    s.write_all(b"r")?;
                    let got = traffic::read_n(&mut s, RESPONSE)?;
                    if got < RESPONSE {
                        return Err(io::Error::other("response cut short"));
                    }
                    // The first response is a cold start for every configuration.
                    if r > 0 {
                        lat.push(t0.elapsed());
                    }
                }
                Ok(lat)
            })
        });
        let emu_stats = emu.finish();
        srv.stop()?;
        phase.latencies = lat?;
        let emu_stats = emu_stats?;
        if let Some(path) = ctx.own_capture(&phase).map(std::path::Path::to_path_buf) {
            // MSS with timestamps: 1500 - IP header - 20 - 12.
            let mss = if topo.ipv6 { 1428 } else { MSS as u32 };
            let flights = flights_after_idle(&path, port, mss, 500, 20)?;
            let firsts: Vec<u32> = flights
                .iter()
                .skip(1)
                .filter_map(|f| f.first().copied())
                .collect();
            let rounds: Vec<usize> = flights.iter().skip(1).map(|f| f.len()).collect();
            phase.analyzer.push(format!("first flight after each idle gap: {firsts:?} segments; round trips per response: {rounds:?}"));
            phase.extra = json!({"flights": flights, "emulator_packets": emu_stats.packets});
        }
        out.phases.push(phase);
    }
    Ok(out)
}
