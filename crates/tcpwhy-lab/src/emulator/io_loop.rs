//! The I/O loop: the netlink socket, polling until the next release, verdicts in batches.

use super::*;

/// Buffered verdicts for one queue, sent with one syscall.
pub(super) struct Verdicts {
    pub(super) buf: Vec<u8>,
    pub(super) queue: u16,
    pub(super) seq: u32,
}

impl Verdicts {
    pub(super) fn drop_now(&mut self, id: u32) {
        self.seq = self.seq.wrapping_add(1);
        verdict_msg(&mut self.buf, self.seq, self.queue, id, NF_DROP, false);
    }

    pub(super) fn accept_up_to(&mut self, id: u32) {
        self.seq = self.seq.wrapping_add(1);
        verdict_msg(&mut self.buf, self.seq, self.queue, id, NF_ACCEPT, true);
    }
}

/// The pure part of the loop: decisions, the delay line and the counters.
pub(super) struct Engine {
    pub(super) line: DelayLine<u32>,
    pub(super) dropper: Dropper,
    pub(super) late: LatencyHistogram,
    pub(super) stats: EmulatorStats,
}

impl Engine {
    pub(super) fn new(cfg: &EmulatorConfig) -> Engine {
        Engine {
            line: DelayLine::new(cfg.delay),
            dropper: Dropper::new(cfg.drops.clone()),
            late: LatencyHistogram::default(),
            stats: EmulatorStats::default(),
        }
    }

    pub(super) fn on_event(&mut self, ev: NlEvent<'_>, arrival: Instant, out: &mut Verdicts) {
        match ev {
            NlEvent::Packet { id, data, wire_len } => {
                self.on_packet(id, data, wire_len, arrival, out)
            }
            NlEvent::Ack { errno, .. } if errno != 0 => self.stats.verdict_errors += 1,
            NlEvent::Garbage => self.stats.malformed += 1,
            NlEvent::Ack { .. } | NlEvent::Other => {}
        }
    }

    pub(super) fn on_packet(
        &mut self,
        id: u32,
        ip: &[u8],
        wire_len: u32,
        arrival: Instant,
        out: &mut Verdicts,
    ) {
        self.stats.packets += 1;
        let (drop, kind) = self.dropper.decide(ip, wire_len);
        match kind {
            PacketKind::Tcp => self.stats.tcp += 1,
            PacketKind::Other => self.stats.non_tcp += 1,
            PacketKind::Malformed => self.stats.malformed += 1,
        }
        if drop {
            self.stats.dropped += 1;
            out.drop_now(id);
        } else {
            self.line.push(arrival, id);
            self.stats.max_held = self.stats.max_held.max(self.line.len());
        }
    }

    /// Releases everything due at `now` with one batch verdict.
    pub(super) fn release_due(&mut self, now: Instant, out: &mut Verdicts) {
        let mut last = None;
        while let Some((due, id)) = self.line.pop_due(now) {
            self.late
                .record(now.saturating_duration_since(due).as_micros() as u64);
            last = Some(id);
        }
        if let Some(id) = last {
            out.accept_up_to(id);
        }
    }

    /// Releases everything still held (shutting down: otherwise the kernel drops them when the
    /// socket closes).
    pub(super) fn release_all(&mut self, out: &mut Verdicts) {
        let mut last = None;
        while let Some((_, id)) = self.line.pop_any() {
            self.stats.released_early += 1;
            last = Some(id);
        }
        if let Some(id) = last {
            out.accept_up_to(id);
        }
    }

    pub(super) fn finish(mut self) -> EmulatorStats {
        self.stats.forwarded = self.stats.packets - self.stats.dropped;
        self.stats.late_p50_us = self.late.quantile(0.50);
        self.stats.late_p99_us = self.late.quantile(0.99);
        self.stats.late_max_us = self.late.max();
        self.stats
    }
}

// I/O

/// A bound NFQUEUE netlink socket.
pub(super) struct Nfq {
    pub(super) fd: OwnedFd,
    pub(super) portid: u32,
}

/// A packet that arrived while we were waiting for the config ACK.
pub(super) struct Early {
    pub(super) id: u32,
    pub(super) data: Vec<u8>,
    pub(super) wire_len: u32,
}

impl Nfq {
    pub(super) fn open(queue: u16, early: &mut Vec<Early>) -> io::Result<Nfq> {
        let fd = socket::socket(
            socket::AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )?;
        socket::bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
        if socket::setsockopt(&fd, socket::sockopt::RcvBufForce, &RCVBUF_BYTES).is_err() {
            socket::setsockopt(&fd, socket::sockopt::RcvBuf, &RCVBUF_BYTES)?;
        }
        let portid = socket::getsockname::<NetlinkAddr>(fd.as_raw_fd())?.pid();
        let nfq = Nfq { fd, portid };

        let seq = 1;
        let mut msg = Vec::with_capacity(64);
        config_msg(&mut msg, seq, queue, COPY_RANGE, QUEUE_MAX_LEN);
        nfq.send(&msg)?;

        // Wait for the ACK; packets may already arrive (the queue is bound first).
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut buf = vec![0u8; RECV_BUF_BYTES];
        for _ in 0..10_000 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            nfq.wait(left)?;
            let n = match nfq.recv(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => continue,
                Err(e) if e.raw_os_error() == Some(Errno::ENOBUFS as i32) => continue,
                Err(e) => return Err(e),
            };
            let mut result = None;
            parse_datagram(&buf[..n], |ev| match ev {
                NlEvent::Ack { seq: s, errno } if s == seq => result = Some(errno),
                NlEvent::Packet { id, data, wire_len } => early.push(Early {
                    id,
                    data: data.to_vec(),
                    wire_len,
                }),
                _ => {}
            });
            match result {
                Some(0) => return Ok(nfq),
                Some(errno) => {
                    let e = io::Error::from_raw_os_error(errno);
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "binding NFQUEUE {queue}: {e} (EBUSY/EPERM: another program holds it)"
                        ),
                    ));
                }
                None => {}
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer from the kernel binding NFQUEUE {queue}"),
        ))
    }

    pub(super) fn send(&self, msg: &[u8]) -> io::Result<()> {
        socket::send(self.fd.as_raw_fd(), msg, MsgFlags::empty())?;
        Ok(())
    }

    /// Sends the buffered verdicts. Transient failures are retried, then counted: the packets
    /// stay queued in the kernel until the socket closes, which drops them.
    pub(super) fn flush(&self, v: &mut Verdicts, stats: &mut EmulatorStats) -> io::Result<()> {
        if v.buf.is_empty() {
            return Ok(());
        }
        for attempt in 0..4 {
            match socket::send(self.fd.as_raw_fd(), &v.buf, MsgFlags::empty()) {
                Ok(_) => break,
                Err(Errno::EINTR | Errno::EAGAIN | Errno::ENOBUFS | Errno::ENOMEM)
                    if attempt < 3 =>
                {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Err(Errno::EINTR | Errno::EAGAIN | Errno::ENOBUFS | Errno::ENOMEM) => {
                    stats.verdict_errors += 1;
                }
                Err(e) => {
                    v.buf.clear();
                    return Err(e.into());
                }
            }
        }
        v.buf.clear();
        Ok(())
    }

    /// One nonblocking receive: Ok(None) when nothing is waiting.
    pub(super) fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_TRUNC;
        match socket::recv(self.fd.as_raw_fd(), buf, flags) {
            // MSG_TRUNC returns the real length: a cut datagram is parsed as far as it goes.
            Ok(n) => Ok(Some(n.min(buf.len()))),
            Err(Errno::EAGAIN | Errno::EINTR) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Sleeps until the socket is readable or `timeout` passed (nanosecond precision).
    pub(super) fn wait(&self, timeout: Duration) -> io::Result<()> {
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        let ts = nix::sys::time::TimeSpec::from_duration(timeout);
        match nix::poll::ppoll(&mut fds, Some(ts), None) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// `(queue_dropped, user_dropped)` for our queue from the kernel's per-namespace table.
pub(super) fn kernel_drop_counters(queue: u16, portid: u32) -> Option<(u64, u64)> {
    // Per network namespace: read it through this thread's view (/proc/thread-self), since the
    // caller moved only this thread into the router's namespace.
    let text = std::fs::read_to_string("/proc/thread-self/net/netfilter/nfnetlink_queue").ok()?;
    parse_queue_proc(&text, queue, portid)
}

/// Lines: queue, portid, queue_total, copy_mode, copy_range, queue_dropped, user_dropped, ...
pub(super) fn parse_queue_proc(text: &str, queue: u16, portid: u32) -> Option<(u64, u64)> {
    text.lines().find_map(|line| {
        let f: Vec<u64> = line
            .split_whitespace()
            .map_while(|w| w.parse().ok())
            .collect();
        (f.len() >= 7 && f[0] == u64::from(queue) && f[1] == u64::from(portid))
            .then(|| (f[5], f[6]))
    })
}

pub(super) fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// Lowers this thread's timer slack to 1 ns for the run (default 50 us) so `ppoll` wakes on
/// time, and restores it on drop.
pub(super) struct TimerSlack(Option<i32>);

impl TimerSlack {
    pub(super) fn tighten() -> TimerSlack {
        let old = nix::sys::prctl::get_timerslack().ok();
        let _ = nix::sys::prctl::set_timerslack(1);
        TimerSlack(old)
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        if let Some(old) = self.0.and_then(|v| u64::try_from(v).ok()) {
            let _ = nix::sys::prctl::set_timerslack(old);
        }
    }
}

/// Runs in the calling thread, which the caller has already moved into the router's network
/// namespace (setns) after installing `iptables-legacy -A FORWARD -j NFQUEUE --queue-num Q`.
/// Returns when `stop` becomes true (checked at least every [`MAX_WAIT`]), with the
/// statistics. Packets still held then are released (accepted) early, since closing the queue
/// would make the kernel drop them.
pub fn run(cfg: &EmulatorConfig, stop: &AtomicBool) -> io::Result<EmulatorStats> {
    let started = Instant::now();
    let cpu_start = thread_cpu_time();
    let _slack = TimerSlack::tighten();
    let mut early = Vec::new();
    let nfq = Nfq::open(cfg.queue, &mut early)?;
    let mut engine = Engine::new(cfg);
    let mut out = Verdicts {
        buf: Vec::with_capacity(VERDICT_FLUSH_BYTES * 2),
        queue: cfg.queue,
        seq: 1,
    };
    let mut buf = vec![0u8; RECV_BUF_BYTES];

    let now = Instant::now();
    for p in &early {
        engine.on_packet(p.id, &p.data, p.wire_len, now, &mut out);
    }
    drop(early);

    loop {
        let now = Instant::now();
        engine.release_due(now, &mut out);
        nfq.flush(&mut out, &mut engine.stats)?;
        if stop.load(Ordering::Relaxed) {
            break;
        }

        let wait = engine
            .line
            .next_release()
            .map_or(MAX_WAIT, |t| t.saturating_duration_since(now))
            .min(MAX_WAIT);
        if wait > SPIN {
            // Wake a little early; the remaining SPIN is covered by nonblocking receives.
            nfq.wait(wait - SPIN)?;
        }

        for _ in 0..RECV_BATCH {
            let n = match nfq.recv(&mut buf) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                // The kernel could not queue packets to our socket (they were dropped).
                Err(e) if e.raw_os_error() == Some(Errno::ENOBUFS as i32) => {
                    engine.stats.overruns += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let arrival = Instant::now();
            parse_datagram(&buf[..n], |ev| engine.on_event(ev, arrival, &mut out));
            if out.buf.len() >= VERDICT_FLUSH_BYTES {
                nfq.flush(&mut out, &mut engine.stats)?;
            }
        }
    }

    engine.release_all(&mut out);
    nfq.flush(&mut out, &mut engine.stats)?;
    if let Some((queue_dropped, user_dropped)) = kernel_drop_counters(cfg.queue, nfq.portid) {
        engine.stats.kernel_queue_dropped = queue_dropped;
        engine.stats.kernel_user_dropped = user_dropped;
    }
    let mut stats = engine.finish();
    stats.elapsed = started.elapsed();
    stats.cpu_time = thread_cpu_time().saturating_sub(cpu_start);
    Ok(stats)
}
