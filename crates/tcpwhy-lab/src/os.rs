//! The one module that talks to the OS directly: namespaces, privileges, signals and command
//! execution. Everything here goes through nix, socket2 and std's safe wrappers.

use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::io;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// True when running as root (the lab needs CAP_NET_ADMIN and CAP_SYS_ADMIN).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Move the calling thread into the named network namespace (`ip netns` name). Sockets the
/// thread creates afterwards live in that namespace.
pub fn enter_netns(name: &str) -> io::Result<()> {
    let f = File::open(format!("/var/run/netns/{name}"))
        .map_err(|e| io::Error::new(e.kind(), format!("netns {name}: {e}")))?;
    setns(&f, CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

/// Run `f` on a new thread inside namespace `ns`.
pub fn spawn_in<T, F>(ns: &str, f: F) -> std::thread::JoinHandle<io::Result<T>>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    spawn_in_on(ns, None, f)
}

/// Run `f` on a new thread inside namespace `ns`, pinned to `cpu` when given. Threads the
/// new thread starts inherit the pinning.
pub fn spawn_in_on<T, F>(
    ns: &str,
    cpu: Option<usize>,
    f: F,
) -> std::thread::JoinHandle<io::Result<T>>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter_netns(&ns)?;
        if let Some(cpu) = cpu {
            pin_to_cpu(cpu)?;
        }
        f()
    })
}

/// The CPUs this process may run on, lowest first: the affinity mask of the first thread
/// that asks (read once, so that threads pinned since do not narrow it).
pub fn allowed_cpus() -> &'static [usize] {
    static CPUS: std::sync::OnceLock<Vec<usize>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
            return Vec::new();
        };
        (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect()
    })
}

/// Where the lab's traffic runs: clients and servers share one CPU, so a bulk sender never
/// moves between CPUs (over veth that reorders its segments) and ping-pongs do not depend on
/// where the scheduler put each side.
pub fn traffic_cpu() -> Option<usize> {
    allowed_cpus().first().copied()
}

/// Where the lab's helpers run (the emulators that forward packets in order, the captures):
/// another CPU than the traffic's when there is one.
pub fn helper_cpu() -> Option<usize> {
    allowed_cpus().last().copied()
}

/// Run a command to completion; its stderr becomes the error message when it fails.
pub fn run(cmd: &str, args: &[&str]) -> io::Result<String> {
    // Administration tools live in sbin, which a user's PATH may lack.
    let mut result = Command::new(cmd).args(args).output();
    for dir in ["/usr/sbin", "/sbin"] {
        match &result {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                result = Command::new(format!("{dir}/{cmd}")).args(args).output();
            }
            _ => break,
        }
    }
    let out =
        result.map_err(|e| io::Error::new(e.kind(), format!("{cmd}: {e} (is it installed?)")))?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A flag set by SIGINT/SIGTERM: loops check it to stop early, cleanup runs on the way out.
pub fn interrupt_flag() -> io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&flag))?;
    }
    Ok(flag)
}

pub fn interrupted(flag: &AtomicBool) -> bool {
    flag.load(Ordering::Relaxed)
}

/// Pin the calling thread to one CPU, so that two threads playing ping-pong share a core and
/// a measurement does not depend on where the scheduler happened to put them.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(io::Error::from)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(io::Error::from)
}
