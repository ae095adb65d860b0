//! Load for bench/watch-overhead.sh: many short connections, or one bulk transfer.
//!
//! ```text
//! connect_load serve ADDR SECS            accept and drain until SECS pass
//! connect_load connect ADDR RATE SECS     RATE connect()s a second for SECS (each closed with
//!                                         an RST, SO_LINGER 0, so no TIME-WAIT fills the ports)
//! connect_load bulk ADDR SECS             one connection sending as fast as it can
//! ```
//! Prints one line of JSON: what was done and how fast.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("argument {i}: {what}"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr: SocketAddr = arg(&args, 2, "ADDR (ip:port)");
    match args.get(1).map(String::as_str) {
        Some("serve") => serve(addr, Duration::from_secs_f64(arg(&args, 3, "SECS"))),
        Some("connect") => connect(
            addr,
            arg(&args, 3, "RATE"),
            Duration::from_secs_f64(arg(&args, 4, "SECS")),
        ),
        Some("bulk") => bulk(addr, Duration::from_secs_f64(arg(&args, 3, "SECS"))),
        _ => panic!("usage: connect_load serve|connect|bulk ..."),
    }
}

fn serve(addr: SocketAddr, secs: Duration) {
    let l = TcpListener::bind(addr).expect("bind");
    l.set_nonblocking(true).expect("nonblocking");
    let end = Instant::now() + secs;
    let mut accepted = 0u64;
    let mut bytes = 0u64;
    while Instant::now() < end {
        match l.accept() {
            Ok((mut s, _)) => {
                accepted += 1;
                // A bulk sender is drained on its own thread; a short connection just closes.
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
                let mut buf = vec![0u8; 1 << 16];
                let mut first = true;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            bytes += n as u64;
                            if first {
                                first = false;
                                let _ = s.set_read_timeout(Some(secs));
                            }
                        }
                    }
                    if Instant::now() >= end {
                        break;
                    }
                }
            }
            Err(_) => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    println!("{{\"accepted\":{accepted},\"bytes\":{bytes}}}");
}

fn connect(addr: SocketAddr, rate: f64, secs: Duration) {
    let start = Instant::now();
    let (mut ok, mut failed) = (0u64, 0u64);
    let mut i = 0u64;
    while start.elapsed() < secs {
        // Paced: connect number i at i / rate seconds.
        let due = start + Duration::from_secs_f64(i as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        i += 1;
        match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(s) => {
                ok += 1;
                let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
            }
            Err(_) => failed += 1,
        }
    }
    let t = start.elapsed().as_secs_f64();
    println!(
        "{{\"connects\":{ok},\"failed\":{failed},\"seconds\":{t:.3},\"per_s\":{:.0}}}",
        ok as f64 / t
    );
}

fn bulk(addr: SocketAddr, secs: Duration) {
    let mut s = TcpStream::connect(addr).expect("connect");
    let buf = vec![0u8; 1 << 20];
    let start = Instant::now();
    let mut sent = 0u64;
    while start.elapsed() < secs {
        match s.write(&buf) {
            Ok(n) => sent += n as u64,
            Err(_) => break,
        }
    }
    let t = start.elapsed().as_secs_f64();
    println!(
        "{{\"bytes\":{sent},\"seconds\":{t:.3},\"gbit_per_s\":{:.2}}}",
        sent as f64 * 8.0 / t / 1e9
    );
}
