//! SYNs dropped by a full backlog.

use super::*;

pub(super) fn syn_backlog_full(ctx: &Ctx) -> io::Result<Outcome> {
    let topo = ctx.topology()?;
    let mut out = Outcome::default();
    const CLIENTS: usize = 8;
    for (pi, (label, backlog, pause)) in [("broken", 1, 3.0f64), ("fixed", 128, 3.0)]
        .into_iter()
        .enumerate()
    {
        ctx.check()?;
        let mut phase = Phase::new(
            label,
            "connect() (the handshake; the reply waits for accept() in both)",
        );
        phase.settings.push(format!(
            "listen backlog {backlog}, accept() starts after {pause} s, {CLIENTS} clients at once"
        ));
        let port = 5000 + pi as u16;
        let srv = spawn_listener(
            &topo.server,
            topo.server_addr(port),
            backlog,
            SockOpts::default(),
            move |l, st| {
                std::thread::sleep(Duration::from_secs_f64(pause));
                let mut n = 0u64;
                while !st.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            let mut b = [0u8; 1];
                            let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                            if s.read_exact(&mut b).is_ok() {
                                let _ = s.write_all(b"!");
                            }
                            n += 1;
                        }
                        Err(e) if idle(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(n)
            },
        )?;
        let to = topo.server_addr(port);
        let lat = captured(ctx, &topo, "syn-backlog-full", &mut phase, || {
            in_ns(&topo.client, move || {
                let handles: Vec<_> = (0..CLIENTS)
                    .map(|_| {
                        std::thread::spawn(move || -> io::Result<Duration> {
                            let (mut s, took) = traffic::connect(to, &SockOpts::default())?;
                            s.set_read_timeout(Some(Duration::from_secs(30)))?;
                            // A request right away, as clients do: it also completes the handshake
                            // on the server side when the final ACK was dropped by the full queue.
                            s.write_all(b"?")?;
                            let mut b = [0u8; 1];
                            s.read_exact(&mut b)?;
                            Ok(took)
                        })
                    })
                    .collect();
                let mut lat = Latencies::default();
                for h in handles {
                    lat.push(
                        h.join()
                            .map_err(|_| io::Error::other("client panicked"))??,
                    );
                }
                Ok(lat)
            })
        });
        let served = srv.stop();
        phase.latencies = lat?;
        served?;
        if let Some(path) = ctx.own_capture(&phase) {
            let conns = connections(path)?;
            let retried = conns
                .iter()
                .filter(|c| c.client.syn_retransmits() > 0)
                .count();
            let max_retries = conns
                .iter()
                .map(|c| c.client.syn_retransmits())
                .max()
                .unwrap_or(0);
            phase.analyzer.push(format!(
                "{retried} of {} connections retransmitted their SYN (up to {max_retries} times)",
                conns.len()
            ));
        }
        out.phases.push(phase);
    }
    Ok(out)
}
