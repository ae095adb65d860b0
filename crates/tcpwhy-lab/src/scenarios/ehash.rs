//! A socket hash table with long chains (seed 003).

use super::*;

/// The TCP line of `/proc/net/sockstat` in the server namespace (in use, TIME-WAIT ...).
fn server_sockstat(topo: &Topology) -> String {
    os::run(
        "ip",
        &["netns", "exec", &topo.server, "cat", "/proc/net/sockstat"],
    )
    .ok()
    .and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("TCP:"))
            .map(str::to_string)
    })
    .unwrap_or_default()
}

pub(super) fn ehash_chain(ctx: &Ctx) -> io::Result<Outcome> {
    let mut out = Outcome::default();
    let steps: &[u64] = if ctx.opts.quick {
        &[0, 20_000, 50_000]
    } else {
        &[0, 50_000, 100_000, 200_000]
    };
    const BUCKETS: u32 = 128;
    // Every fill connection gets its own 4-tuple: 4 extra client addresses x 63 000 ports.
    const EXTRA_IPS: [&str; 4] = ["10.201.1.3", "10.201.1.4", "10.201.1.5", "10.201.1.6"];
    const PORTS: u64 = 63_000;
    for (label, ehash) in [("own-table-128", Some(BUCKETS)), ("shared-table", None)] {
        ctx.check()?;
        // IPv4 only (its fill uses four extra IPv4 client addresses); no capture.
        let topo = Topology::create(&TopologyOptions {
            server_ehash_entries: ehash,
            ..TopologyOptions::default()
        })?;
        let entries = topo.sysctl_get(&topo.server, "net.ipv4.tcp_ehash_entries")?;
        let mut phase = Phase::new(
            label,
            "1-byte round trip on a connection made before the fill",
        );
        phase.settings.push(format!(
            "server namespace tcp_ehash_entries = {entries} (negative: the shared global table)"
        ));
        if let Some(n) = ehash {
            if entries.trim() != n.to_string() {
                return Err(io::Error::other(format!("tcp_ehash_entries reads {entries}, expected {n}: kernel without tcp_child_ehash_entries?")));
            }
        }
        // The fill connections wait in the accept queue (this host allows 20 000 descriptors per
        // process, not 200 000): full sockets in the established hash, no descriptor needed.
        topo.sysctl(&topo.server, "net.core.somaxconn", "400000")?;
        topo.sysctl(&topo.client, "net.ipv4.ip_local_port_range", "1024 65000")?;
        for ip in EXTRA_IPS {
            os::run(
                "ip",
                &[
                    "-n",
                    &topo.client,
                    "addr",
                    "add",
                    &format!("{ip}/24"),
                    "dev",
                    crate::topo::CLIENT_IF,
                ],
            )?;
        }
        // Fill server: never accepts. The client closes each fill connection at once, so the
        // server side holds it in CLOSE_WAIT in the accept queue.
        let fill = spawn_listener(
            &topo.server,
            server_addr(5000),
            400_000,
            SockOpts::default(),
            |_l, st| {
                while !st.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(0)
            },
        )?;
        let pp = server(&topo, 6000, 16, SockOpts::default(), |mut s| {
            let _ = os::pin_to_cpu(0);
            let mut b = [0u8; 1];
            while matches!(s.read(&mut b), Ok(1)) {
                if s.write_all(&b).is_err() {
                    break;
                }
            }
        })?;
        let stop = Arc::clone(&ctx.stop);
        let steps_v = steps.to_vec();
        let (tx, rx) = std::sync::mpsc::channel::<u64>();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<(u64, f64, Latencies)>();
        // The measuring connection lives in its own thread; the filler tells it when a step is full.
        let measurer = os::spawn_in(&topo.client, move || {
            os::pin_to_cpu(0)?;
            let (mut s, _) = traffic::connect(
                server_addr(6000),
                &SockOpts {
                    nodelay: true,
                    ..SockOpts::default()
                },
            )?;
            let mut b = [0u8; 1];
            while let Ok(k) = rx.recv() {
                let mut lat = Latencies::default();
                let t_end = Instant::now() + Duration::from_millis(1500);
                let t0 = Instant::now();
                let mut n = 0u64;
                while Instant::now() < t_end {
                    let t = Instant::now();
                    s.write_all(b"x")?;
                    s.read_exact(&mut b)?;
                    lat.push(t.elapsed());
                    n += 1;
                }
                let _ = done_tx.send((k, n as f64 / t0.elapsed().as_secs_f64(), lat));
            }
            Ok(())
        });
        let topo_ref = &topo;
        let mut rows = Vec::new();
        let filler = {
            let stop = Arc::clone(&stop);
            os::spawn_in(&topo.client, move || {
                let mut made = 0u64;
                let mut errors = 0u64;
                let mut step_done = Vec::new();
                for &k in &steps_v {
                    let t0 = Instant::now();
                    while made < k
                        && !os::interrupted(&stop)
                        && t0.elapsed() < Duration::from_secs(60)
                    {
                        let i = made + errors;
                        let Some(ip) = EXTRA_IPS.get((i / PORTS) as usize) else {
                            return Err(io::Error::other("fill: out of 4-tuples"));
                        };
                        let port = 1024 + i % PORTS;
                        let s = socket2::Socket::new(
                            socket2::Domain::IPV4,
                            socket2::Type::STREAM,
                            None,
                        )?;
                        s.set_reuse_address(true)?;
                        let local: SocketAddr =
                            format!("{ip}:{port}").parse().map_err(io::Error::other)?;
                        s.bind(&local.into())?;
                        match s.connect_timeout(&server_addr(5000).into(), Duration::from_secs(5)) {
                            // Closing at once: the server's side waits in CLOSE_WAIT.
                            Ok(()) => made += 1,
                            Err(_) => errors += 1,
                        }
                        drop(s);
                        if errors > 1_000 {
                            return Err(io::Error::other("fill: too many connect errors"));
                        }
                    }
                    step_done.push((k, made, t0.elapsed().as_secs_f64()));
                    let _ = tx.send(k);
                    // Wait for the measurement of this step before adding more.
                    std::thread::sleep(Duration::from_millis(1700));
                }
                Ok(step_done)
            })
        };
        let fill_steps = filler
            .join()
            .map_err(|_| io::Error::other("filler panicked"))??;
        let mut all = Latencies::default();
        for _ in 0..fill_steps.len() {
            match done_rx.recv_timeout(Duration::from_secs(10)) {
                Ok((k, rate, lat)) => {
                    rows.push(json!({"target": k, "round_trips_per_s": rate.round(), "p50_ms": lat.p50().map(crate::stats::ms)}));
                    if k == *steps.last().unwrap_or(&0) {
                        all.extend(lat);
                    }
                }
                Err(_) => break,
            }
        }
        let tw = server_sockstat(topo_ref);
        pp.stop()?;
        fill.stop()?;
        let _ = measurer.join();
        phase.analyzer.push(format!(
            "server namespace /proc/net/sockstat at the end: {tw}"
        ));
        phase.extra = json!({"steps": rows, "fill": fill_steps.iter().map(|(k, m, s)| json!({"target": k, "made": m, "seconds": s})).collect::<Vec<_>>()});
        phase.latencies = all;
        out.phases.push(phase);
    }
    // The ratio that matters: rate at the largest fill against rate with no fill, per table.
    for p in &out.phases {
        if let Some(steps) = p.extra["steps"].as_array() {
            let first = steps
                .first()
                .and_then(|s| s["round_trips_per_s"].as_f64())
                .unwrap_or(0.0);
            let last = steps
                .last()
                .and_then(|s| s["round_trips_per_s"].as_f64())
                .unwrap_or(0.0);
            if last > 0.0 {
                out.notes.push(format!(
                    "{}: {:.0} round trips/s empty, {:.0} at the largest fill ({:.1}x slower)",
                    p.name,
                    first,
                    last,
                    first / last
                ));
            }
        }
    }
    Ok(out)
}
