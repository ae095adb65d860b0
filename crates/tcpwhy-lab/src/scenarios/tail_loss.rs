//! The last segment of a response lost: recovered by a loss probe or a timeout.

use super::*;

pub(super) fn tail_loss(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let n = if ctx.opts.quick { 8 } else { 20 };
    // Nine full segments and a short tail: only the tail is shorter than TAIL_MAX, so the
    // router can pick it out (PSH also marks segments in the middle of a response).
    const TAIL: usize = 500;
    const TAIL_MAX: u32 = 1000;
    const RESPONSE: usize = 9 * MSS + TAIL;
    let server_ip = topo.server_ip();
    for (pi, label) in ["broken", "control"].into_iter().enumerate() {
        ctx.check()?;
        let mut phase = Phase::new(label, "request to complete 10-segment response");
        let port = 5000 + pi as u16;
        let srv = server(&topo, port, 16, SockOpts::default(), |mut s| {
            let mut b = [0u8; 1];
            while matches!(s.read(&mut b), Ok(1)) {
                if traffic::write_zeros(&mut s, RESPONSE).is_err() {
                    break;
                }
            }
        })?;
        // Dropping the 1st, 3rd, 5th ... short data segment drops every tail once and lets its
        // retransmission (loss probe or RTO) through.
        let drops = if label == "broken" {
            phase
                .settings
                .push("the mid router drops the last (short) segment of each response once (on the server's side of the middle vantage)".into());
            (0..n as u32)
                .map(|i| DropRule {
                    src: Some(server_ip),
                    min_payload: 1,
                    max_payload: Some(TAIL_MAX),
                    skip: 2 * i,
                    count: 1,
                    ..DropRule::default()
                })
                .collect()
        } else {
            phase.settings.push("nothing dropped".into());
            Vec::new()
        };
        phase
            .settings
            .push("20 ms RTT (10 ms each way), one connection, requests 200 ms apart".into());
        let emu = start_emulator(
            &topo,
            EmulatorConfig {
                queue: 0,
                delay: Duration::from_millis(10),
                drops,
            },
        )?;
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(port);
        // At the server by default: the dropped segment and its retransmission are both on the
        // wire there.
        let lat = captured(ctx, &topo, "tail-loss", &mut phase, || {
            in_ns(&topo.client, move || {
                let (mut s, _) = traffic::connect(
                    to,
                    &SockOpts {
                        nodelay: true,
                        ..SockOpts::default()
                    },
                )?;
                let mut lat = Latencies::default();
                for _ in 0..n {
                    if os::interrupted(&stop) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                    let t0 = Instant::now();
                    s.write_all(b"r")?;
                    traffic::read_n(&mut s, RESPONSE)?;
                    lat.push(t0.elapsed());
                }
                Ok(lat)
            })
        });
        let stats = emu.finish();
        srv.stop()?;
        phase.latencies = lat?;
        let stats = stats?;
        phase.extra = json!({"emulator_dropped": stats.dropped});
        if let Some(path) = ctx.own_capture(&phase) {
            let conns = connections(path)?;
            let retrans: u32 = conns.iter().map(|c| c.server.retrans_segments()).sum();
            phase.analyzer.push(format!(
                "server retransmitted {retrans} segments; emulator dropped {}",
                stats.dropped
            ));
        }
        out.phases.push(phase);
    }
    Ok(out)
}
