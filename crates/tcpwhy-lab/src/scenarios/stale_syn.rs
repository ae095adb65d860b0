//! SYNs meeting an earlier connection's state: TIME-WAIT (seed 004), a socket whose RST was lost
//! (seed 000).

use super::*;

pub(super) fn stale_syn_timewait(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    // With tcp_rfc1337 each reconnect waits for TIME-WAIT to end (about a minute).
    let n = if ctx.opts.rfc1337 {
        if ctx.opts.quick {
            1
        } else {
            2
        }
    } else if ctx.opts.quick {
        3
    } else {
        10
    };
    if ctx.opts.rfc1337 {
        topo.sysctl(&topo.server, "net.ipv4.tcp_rfc1337", "1")?;
        out.notes.push("server net.ipv4.tcp_rfc1337=1: the TIME-WAIT socket ignores the client's RST, so the SYN waits for TIME-WAIT to end".into());
    }
    let srv = server(&topo, 5000, 128, SockOpts::default(), |mut s| {
        // Read what the client sends, then close first: this side holds TIME-WAIT.
        let _ = traffic::read_n(&mut s, BULK);
    })?;
    for (pi, (label, ts)) in [("broken", "0"), ("fixed", "1")].into_iter().enumerate() {
        ctx.check()?;
        topo.sysctl(&topo.client, "net.ipv4.tcp_timestamps", ts)?;
        let mut phase = Phase::new(label, "reconnect (connect() from the same port)");
        phase
            .settings
            .push(format!("client net.ipv4.tcp_timestamps={ts}"));
        phase.settings.push(format!(
            "{} MB per old connection, reconnect 20 ms after its close",
            BULK >> 20
        ));
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(5000);
        let name = if ctx.opts.rfc1337 {
            "stale-syn-timewait-rfc1337"
        } else {
            "stale-syn-timewait"
        };
        let lat = captured(ctx, &topo, name, &mut phase, || {
            in_ns(&topo.client, move || {
                let mut lat = Latencies::default();
                let mut rates = Vec::new();
                for i in 0..n {
                    if os::interrupted(&stop) {
                        break;
                    }
                    let port = 41000 + (pi * 100 + i) as u16;
                    let opts = SockOpts {
                        local_port: Some(port),
                        ..SockOpts::default()
                    };
                    let t0 = Instant::now();
                    let (mut s, _) = traffic::connect(to, &opts)?;
                    traffic::write_zeros(&mut s, BULK)?;
                    traffic::read_to_eof(&mut s)?; // the server closes first
                    rates.push(BULK as f64 / t0.elapsed().as_secs_f64() / 1e6);
                    drop(s);
                    // Our FIN's ACK must arrive before the 4-tuple is free here.
                    std::thread::sleep(Duration::from_millis(20));
                    let (s, took) = traffic::connect(to, &opts)?;
                    lat.push(took);
                    drop(s);
                }
                Ok((lat, rates))
            })
        })?;
        let (lat, rates) = lat;
        let min_rate = rates.iter().copied().fold(f64::INFINITY, f64::min);
        phase.extra = json!({"old_connection_mb_per_s_min": (min_rate * 10.0).round() / 10.0});
        phase.latencies = lat;
        out.phases.push(phase);
    }
    srv.stop()?;
    Ok(out)
}

pub(super) fn stale_syn_lost_rst(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let n = if ctx.opts.quick { 5 } else { 10 };
    let client_ip = topo.client_ip();
    // The server reads the 4-byte request and keeps its socket: a stale socket if the client's
    // RST never arrives.
    let srv = server(&topo, 5000, 128, SockOpts::default(), |mut s| {
        let _ = traffic::read_n(&mut s, 4);
        let _ = traffic::read_to_eof(&mut s);
    })?;
    for (pi, label) in ["broken", "control"].into_iter().enumerate() {
        ctx.check()?;
        let mut phase = Phase::new(label, "reconnect (connect() from the same port)");
        let drops = if label == "broken" {
            phase
                .settings
                .push("router drops the client's RST|ACK (the abortive close)".into());
            // The abortive close sends RST|ACK; the RST answering a challenge ACK in SYN_SENT
            // has no ACK bit and must pass.
            vec![DropRule {
                src: Some(client_ip),
                flags_all: TcpFlags::RST | TcpFlags::ACK,
                ..DropRule::default()
            }]
        } else {
            phase.settings.push("router forwards everything".into());
            Vec::new()
        };
        phase
            .settings
            .push("client SO_LINGER {1,0}, TCP_NODELAY; 4-byte request".into());
        let emu = start_emulator(
            &topo,
            EmulatorConfig {
                queue: 0,
                delay: Duration::ZERO,
                drops,
            },
        )?;
        let stop = Arc::clone(&ctx.stop);
        let to = topo.server_addr(5000);
        let lat = captured(ctx, &topo, "stale-syn-lost-rst", &mut phase, || {
            in_ns(&topo.client, move || {
                let mut lat = Latencies::default();
                for i in 0..n {
                    if os::interrupted(&stop) {
                        break;
                    }
                    let port = 42000 + (pi * 100 + i) as u16;
                    let opts = SockOpts {
                        local_port: Some(port),
                        linger0: true,
                        nodelay: true,
                        ..SockOpts::default()
                    };
                    let (mut s, _) = traffic::connect(to, &opts)?;
                    s.write_all(b"ping")?;
                    std::thread::sleep(Duration::from_millis(5));
                    drop(s); // RST
                    std::thread::sleep(Duration::from_millis(5));
                    let (mut s, took) = traffic::connect(to, &opts)?;
                    lat.push(took);
                    s.write_all(b"ping")?;
                    std::thread::sleep(Duration::from_millis(5));
                    let mut b = [0u8; 1];
                    let _ = s.set_read_timeout(Some(Duration::from_millis(1)));
                    let _ = s.read(&mut b);
                }
                Ok(lat)
            })
        });
        let stats = emu.finish()?;
        phase.latencies = lat?;
        phase.extra = json!({"emulator_packets": stats.packets, "emulator_dropped": stats.dropped});
        out.phases.push(phase);
    }
    srv.stop()?;
    Ok(out)
}
