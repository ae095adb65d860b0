//! Seed 000's own reproducer: many short connections from few ports, looking for a slow one.

use super::*;

pub(super) fn seed000_reproducer(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    let secs = if ctx.opts.quick {
        ctx.opts.seconds.min(3.0)
    } else {
        ctx.opts.seconds
    };
    let mut phase = Phase::new("seed-loop", "connect + 4-byte request + read until close");
    phase.settings.push("127.0.0.1:4242 inside the server namespace; client SO_LINGER {1,0} and TCP_NODELAY, server accept/read/close".into());
    phase.settings.push(format!(
        "{secs} s, no capture (hundreds of thousands of connections)"
    ));
    // The seed's server: one thread, accept, read 4 bytes, close.
    let at: SocketAddr = "127.0.0.1:4242".parse().map_err(io::Error::other)?;
    let srv = spawn_listener(&topo.server, at, 128, SockOpts::default(), |l, st| {
        let mut n = 0u64;
        while !st.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((mut s, _)) => {
                    let mut b = [0u8; 4];
                    let _ = s.read_exact(&mut b);
                    n += 1;
                }
                Err(e) if idle(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    })?;
    let interrupt = Arc::clone(&ctx.stop);
    let lat = in_ns(&topo.server, move || {
        let mut lat = Latencies::default();
        let to: SocketAddr = "127.0.0.1:4242".parse().map_err(io::Error::other)?;
        let opts = SockOpts {
            linger0: true,
            nodelay: true,
            ..SockOpts::default()
        };
        let t_end = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < t_end && !os::interrupted(&interrupt) {
            let t0 = Instant::now();
            let (mut s, _) = traffic::connect(to, &opts)?;
            s.write_all(b"ping")?;
            let mut b = [0u8; 16];
            let _ = s.read(&mut b);
            drop(s);
            lat.push(t0.elapsed());
        }
        Ok(lat)
    })?;
    let served = srv.stop()?;
    let over = lat.count_over(Duration::from_millis(100));
    phase.extra = json!({
        "connections": lat.len(),
        "served": served,
        "per_second": (lat.len() as f64 / secs).round(),
        "over_100ms": over,
        "histogram": lat.histogram().iter().map(|(k, v)| json!({"range": k, "count": v})).collect::<Vec<_>>(),
    });
    out.notes.push(format!(
        "{} connections in {secs} s ({:.0}/s), {over} took over 100 ms",
        lat.len(),
        lat.len() as f64 / secs
    ));
    phase.latencies = lat;
    out.phases.push(phase);
    Ok(out)
}
