//! tcpwhy's own clients and servers, with the socket options the scenarios need.

use socket2::{Domain, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default)]
pub struct SockOpts {
    pub nodelay: bool,
    /// SO_LINGER {1, 0}: close() sends RST (seed 000's client).
    pub linger0: bool,
    /// TCP_CONGESTION, e.g. "cubic" (the namespace default on this kernel is BBR).
    pub congestion: Option<&'static str>,
    /// Bind to this local port before connecting (SO_REUSEADDR set).
    pub local_port: Option<u16>,
}

fn apply(s: &Socket, o: &SockOpts) -> io::Result<()> {
    if o.nodelay {
        s.set_tcp_nodelay(true)?;
    }
    if o.linger0 {
        s.set_linger(Some(Duration::ZERO))?;
    }
    if let Some(cc) = o.congestion {
        s.set_tcp_congestion(cc.as_bytes())?;
    }
    Ok(())
}

/// Connect with the options; returns the stream and how long connect() took.
pub fn connect(to: SocketAddr, o: &SockOpts) -> io::Result<(TcpStream, Duration)> {
    let s = Socket::new(Domain::for_address(to), Type::STREAM, None)?;
    apply(&s, o)?;
    if let Some(p) = o.local_port {
        s.set_reuse_address(true)?;
        let local: SocketAddr = match to {
            SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], p)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], p)),
        };
        s.bind(&SockAddr::from(local))?;
    }
    let t0 = Instant::now();
    s.connect_timeout(&SockAddr::from(to), Duration::from_secs(90))?;
    let took = t0.elapsed();
    Ok((s.into(), took))
}

/// A listener with SO_REUSEADDR, the given backlog, and a 50 ms accept timeout so serving
/// loops can notice their stop flag.
pub fn listen(at: SocketAddr, backlog: i32, o: &SockOpts) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(at), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    apply(&s, o)?;
    s.bind(&SockAddr::from(at))?;
    s.listen(backlog)?;
    s.set_read_timeout(Some(Duration::from_millis(50)))?;
    Ok(s.into())
}

/// Accept until `stop`; hand each connection to `handle` on its own thread. The socket closes
/// as soon as its handler returns; at the stop, connections still open are shut down (their
/// handlers' reads return) and joined. Returns the number of connections accepted.
pub fn serve<F>(l: TcpListener, stop: Arc<AtomicBool>, handle: F) -> io::Result<u64>
where
    F: Fn(TcpStream) + Send + Sync + 'static,
{
    let handle = Arc::new(handle);
    // A second handle on every open connection, so the stop can unblock its handler.
    let open: Arc<Mutex<HashMap<u64, TcpStream>>> = Arc::default();
    let mut n = 0;
    let mut workers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((s, _)) => {
                n += 1;
                s.set_read_timeout(Some(Duration::from_secs(120)))?;
                if let Ok(mut m) = open.lock() {
                    m.insert(n, s.try_clone()?);
                }
                let (h, open) = (Arc::clone(&handle), Arc::clone(&open));
                workers.push(std::thread::spawn(move || {
                    h(s);
                    if let Ok(mut m) = open.lock() {
                        m.remove(&n);
                    }
                }));
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        workers.retain(|w| !w.is_finished());
    }
    if let Ok(m) = open.lock() {
        for s in m.values() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    for w in workers {
        let _ = w.join();
    }
    Ok(n)
}

/// Read exactly `n` bytes (or until EOF); returns how many arrived.
pub fn read_n(s: &mut TcpStream, n: usize) -> io::Result<usize> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0;
    while got < n {
        let want = (n - got).min(buf.len());
        match s.read(&mut buf[..want]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Read until the peer closes.
pub fn read_to_eof(s: &mut TcpStream) -> io::Result<usize> {
    read_n(s, usize::MAX)
}

pub fn write_zeros(s: &mut TcpStream, n: usize) -> io::Result<()> {
    let buf = vec![0x5au8; 64 * 1024];
    let mut left = n;
    while left > 0 {
        let k = left.min(buf.len());
        s.write_all(&buf[..k])?;
        left -= k;
    }
    Ok(())
}
