//! The lab's topology: four network namespaces, client -- router -- mid -- server, joined by
//! veth pairs, and everything needed to undo it.
//!
//! The router and the mid are the network between the hosts: the router may run the link
//! emulator on what the client sends, the mid on what the server sends, so a capture on the
//! link between them (the router's `rs0`, the middle vantage) sees half the round trip on each
//! side, like a tap in the middle of a path. Their interfaces never use offloads (a wire carries frames of at most the MTU); the
//! hosts' interfaces (`c0`, `s0`) use them or not as the run asks.
//!
//! Every namespace and every change outside them is written to a state file under
//! [`STATE_DIR`] *before* it is made, so `tcpwhy lab clean` can undo a run that was killed with
//! SIGKILL. Dropping a [`Topology`] undoes it (on success, failure, panic or Ctrl-C).

use crate::os;
use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

pub const STATE_DIR: &str = "/run/tcpwhy-lab";
/// Every lab namespace name starts with this; `lab clean` touches only names it recorded.
pub const PREFIX: &str = "twlab";

/// Addresses exist only inside the lab's namespaces (RFC 1918, chosen to be unusual).
pub const CLIENT_ADDR: &str = "10.201.1.2";
pub const ROUTER_CLIENT_SIDE: &str = "10.201.1.1";
pub const ROUTER_MID_SIDE: &str = "10.201.3.1";
pub const MID_ROUTER_SIDE: &str = "10.201.3.2";
pub const MID_SERVER_SIDE: &str = "10.201.2.1";
pub const SERVER_ADDR: &str = "10.201.2.2";
/// IPv6 addresses: unique local (fd00::/8) prefixes chosen to be unusual, inside the lab's
/// namespaces only.
pub const CLIENT_ADDR6: &str = "fd00:201:1::2";
pub const ROUTER_CLIENT_SIDE6: &str = "fd00:201:1::1";
pub const ROUTER_MID_SIDE6: &str = "fd00:201:3::1";
pub const MID_ROUTER_SIDE6: &str = "fd00:201:3::2";
pub const MID_SERVER_SIDE6: &str = "fd00:201:2::1";
pub const SERVER_ADDR6: &str = "fd00:201:2::2";
/// Interface names inside the namespaces (names are per namespace, so runs never collide).
pub const CLIENT_IF: &str = "c0";
pub const ROUTER_CLIENT_IF: &str = "rc0";
/// The router's side of the router -- mid link: the middle vantage.
pub const ROUTER_SERVER_IF: &str = "rs0";
pub const MID_ROUTER_IF: &str = "mr0";
pub const MID_SERVER_IF: &str = "ms0";
pub const SERVER_IF: &str = "s0";

/// Options that must be set before the namespaces exist.
#[derive(Clone, Debug, Default)]
pub struct TopologyOptions {
    /// Give the server namespace its own established-hash table of this many buckets
    /// (net.ipv4.tcp_child_ehash_entries in the parent namespace while it is created).
    pub server_ehash_entries: Option<u32>,
    /// The hosts' veths (`c0`, `s0`) keep TSO and GSO on and turn GRO on, so captures there
    /// hold super-segments (sent) and GRO-merged frames (received). Off: no offloads anywhere.
    pub offloads: bool,
    /// Give every interface an IPv6 address too (and the scenarios connect over IPv6).
    pub ipv6: bool,
}

pub struct Topology {
    pub id: String,
    pub client: String,
    pub router: String,
    /// The second router, between the router and the server.
    pub mid: String,
    pub server: String,
    pub ipv6: bool,
    offloads: bool,
    state: PathBuf,
    /// Sysctls of the parent namespace changed, with their values before.
    restored: Vec<(String, String)>,
    namespaces: Vec<String>,
}

/// The constants above are valid addresses; the fallback is never taken.
fn parse_ip(s: &str) -> IpAddr {
    s.parse().unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

fn record(state: &PathBuf, line: &str) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(state)?;
    writeln!(f, "{line}")?;
    f.sync_all()
}

impl Topology {
    pub fn create(opts: &TopologyOptions) -> io::Result<Topology> {
        fs::create_dir_all(STATE_DIR)?;
        // pid + a counter: two runs (or two topologies of one run) never share a name.
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{PREFIX}{}x{n}", std::process::id());
        let state = PathBuf::from(STATE_DIR).join(format!("{id}.state"));
        let mut t = Topology {
            client: format!("{id}-c"),
            router: format!("{id}-r"),
            mid: format!("{id}-m"),
            server: format!("{id}-s"),
            ipv6: opts.ipv6,
            offloads: opts.offloads,
            id,
            state,
            restored: Vec::new(),
            namespaces: Vec::new(),
        };
        // From here on, Drop undoes whatever was done, also when a step fails.
        let server = t.server.clone();
        if let Some(n) = opts.server_ehash_entries {
            let key = "net.ipv4.tcp_child_ehash_entries";
            let old = fs::read_to_string(sysctl_path(key))?.trim().to_string();
            record(&t.state, &format!("sysctl {key} {old}"))?;
            t.restored.push((key.to_string(), old));
            fs::write(sysctl_path(key), n.to_string())?;
            t.add_netns(&server)?;
            t.restore_sysctls()?;
        } else {
            t.add_netns(&server)?;
        }
        let (client, router, mid) = (t.client.clone(), t.router.clone(), t.mid.clone());
        t.add_netns(&client)?;
        t.add_netns(&router)?;
        t.add_netns(&mid)?;
        t.wire()?;
        if t.ipv6 {
            t.settle_ipv6()?;
        }
        Ok(t)
    }

    /// Wait until no IPv6 address is tentative, then resolve every neighbour on the path with
    /// one refused connection (client to the server's port 9 and the RST back), so that the
    /// first SYN a scenario sends does not wait in a neighbour queue (it waited about 1 s for
    /// the client's second neighbour solicitation). Bounded: 5 s for the addresses, 3 s for
    /// the connection.
    fn settle_ipv6(&self) -> io::Result<()> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        for ns in &self.namespaces {
            loop {
                let tentative = os::run("ip", &["-n", ns, "-6", "addr", "show", "tentative"])?;
                if tentative.is_empty() {
                    break;
                }
                if std::time::Instant::now() > deadline {
                    return Err(io::Error::other(format!(
                        "IPv6 addresses in {ns} still tentative after 5 s: {tentative}"
                    )));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let to = self.server_addr(9);
        let probe = os::spawn_in(&self.client, move || {
            let t0 = std::time::Instant::now();
            // Refused is the expected answer: the server namespace has nothing on port 9.
            let _ = std::net::TcpStream::connect_timeout(&to, std::time::Duration::from_secs(3));
            Ok(t0.elapsed())
        });
        probe
            .join()
            .map_err(|_| io::Error::other("neighbour probe panicked"))?
            .map(|_| ())
    }

    fn add_netns(&mut self, name: &str) -> io::Result<()> {
        record(&self.state, &format!("netns {name}"))?;
        os::run("ip", &["netns", "add", name])?;
        self.namespaces.push(name.to_string());
        if self.ipv6 {
            // Addresses usable at once: while duplicate-address detection runs, a neighbour
            // holds the first packet (the first SYN waited about 1 s). Set before the veths
            // exist, so they inherit it. No router solicitations in the captures.
            for key in [
                "net.ipv6.conf.all.accept_dad",
                "net.ipv6.conf.default.accept_dad",
                "net.ipv6.conf.all.router_solicitations",
                "net.ipv6.conf.default.router_solicitations",
            ] {
                self.sysctl(name, key, "0")?;
            }
        } else {
            // IPv4 only: no router solicitations or MLD reports in the captures.
            for key in [
                "net.ipv6.conf.all.disable_ipv6",
                "net.ipv6.conf.default.disable_ipv6",
            ] {
                self.sysctl(name, key, "1")?;
            }
        }
        os::run("ip", &["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    fn wire(&self) -> io::Result<()> {
        let (c, r, m, s) = (&self.client, &self.router, &self.mid, &self.server);
        for (ns, ifname, peer_ns, peer) in [
            (c, CLIENT_IF, r, ROUTER_CLIENT_IF),
            (r, ROUTER_SERVER_IF, m, MID_ROUTER_IF),
            (s, SERVER_IF, m, MID_SERVER_IF),
        ] {
            os::run(
                "ip",
                &[
                    "-n", ns, "link", "add", ifname, "type", "veth", "peer", "name", peer, "netns",
                    peer_ns,
                ],
            )?;
        }
        for (ns, ifname, addr, addr6, host) in [
            (c, CLIENT_IF, CLIENT_ADDR, CLIENT_ADDR6, true),
            (
                r,
                ROUTER_CLIENT_IF,
                ROUTER_CLIENT_SIDE,
                ROUTER_CLIENT_SIDE6,
                false,
            ),
            (
                r,
                ROUTER_SERVER_IF,
                ROUTER_MID_SIDE,
                ROUTER_MID_SIDE6,
                false,
            ),
            (m, MID_ROUTER_IF, MID_ROUTER_SIDE, MID_ROUTER_SIDE6, false),
            (m, MID_SERVER_IF, MID_SERVER_SIDE, MID_SERVER_SIDE6, false),
            (s, SERVER_IF, SERVER_ADDR, SERVER_ADDR6, true),
        ] {
            os::run(
                "ip",
                &[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    ifname,
                ],
            )?;
            if self.ipv6 {
                os::run(
                    "ip",
                    &[
                        "-n",
                        ns,
                        "-6",
                        "addr",
                        "add",
                        &format!("{addr6}/64"),
                        "dev",
                        ifname,
                    ],
                )?;
            }
            // Offloads on a host: the veth defaults (TSO and GSO on) plus GRO, which hosts
            // with real NICs have on; the routers' interfaces are the wire: never.
            let on = if self.offloads && host { "on" } else { "off" };
            os::run(
                "ip",
                &[
                    "netns", "exec", ns, "ethtool", "-K", ifname, "tso", on, "gso", on, "gro", on,
                ],
            )?;
            os::run(
                "ip",
                &["-n", ns, "link", "set", ifname, "mtu", "1500", "up"],
            )?;
        }
        let mut routes = vec![
            (c, "default", ROUTER_CLIENT_SIDE),
            (s, "default", MID_SERVER_SIDE),
            (r, "10.201.2.0/24", MID_ROUTER_SIDE),
            (m, "10.201.1.0/24", ROUTER_MID_SIDE),
        ];
        if self.ipv6 {
            routes.extend([
                (c, "default", ROUTER_CLIENT_SIDE6),
                (s, "default", MID_SERVER_SIDE6),
                (r, "fd00:201:2::/64", MID_ROUTER_SIDE6),
                (m, "fd00:201:1::/64", ROUTER_MID_SIDE6),
            ]);
        }
        for (ns, to, via) in routes {
            let family = if via.contains(':') { "-6" } else { "-4" };
            os::run("ip", &["-n", ns, family, "route", "add", to, "via", via])?;
        }
        self.steer_router_receive()?;
        for ns in [r, m] {
            self.sysctl(ns, "net.ipv4.ip_forward", "1")?;
            if self.ipv6 {
                self.sysctl(ns, "net.ipv6.conf.all.forwarding", "1")?;
            }
        }
        Ok(())
    }

    /// The emulator's verdicts hand the kernel one packet at a time, and each is forwarded to
    /// the end before the next (softirqs run as each verdict ends), so a host behind it would
    /// receive them one by one and its GRO could merge nothing. With receive packet steering
    /// on the routers' inner interfaces, the packets of a verdict batch wait in the traffic
    /// CPU's backlog and reach the host together, as back-to-back segments reach a NIC.
    /// Nothing to do with one CPU.
    fn steer_router_receive(&self) -> io::Result<()> {
        let (Some(traffic), Some(helper)) = (os::traffic_cpu(), os::helper_cpu()) else {
            return Ok(());
        };
        if traffic == helper || traffic >= 32 {
            return Ok(());
        }
        let mask = format!("{:x}", 1u32 << traffic);
        for (ns, ifname) in [(&self.router, ROUTER_SERVER_IF), (&self.mid, MID_ROUTER_IF)] {
            // `ip netns exec` mounts the namespace's own /sys.
            let path = format!("/sys/class/net/{ifname}/queues/rx-0/rps_cpus");
            os::run(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "sh",
                    "-c",
                    &format!("echo {mask} > {path}"),
                ],
            )?;
        }
        Ok(())
    }

    pub fn client_ip(&self) -> IpAddr {
        parse_ip(if self.ipv6 { CLIENT_ADDR6 } else { CLIENT_ADDR })
    }

    pub fn server_ip(&self) -> IpAddr {
        parse_ip(if self.ipv6 { SERVER_ADDR6 } else { SERVER_ADDR })
    }

    /// Where the scenarios' servers listen, over this topology's IP version.
    pub fn server_addr(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.server_ip(), port)
    }

    /// Whether the hosts' veths use offloads (TSO, GSO, GRO).
    pub fn offloads(&self) -> bool {
        self.offloads
    }

    /// Set a sysctl inside one of the lab's namespaces (it disappears with the namespace).
    pub fn sysctl(&self, ns: &str, key: &str, value: &str) -> io::Result<()> {
        os::run(
            "ip",
            &[
                "netns",
                "exec",
                ns,
                "sysctl",
                "-q",
                "-w",
                &format!("{key}={value}"),
            ],
        )
        .map(|_| ())
    }

    pub fn sysctl_get(&self, ns: &str, key: &str) -> io::Result<String> {
        os::run("ip", &["netns", "exec", ns, "sysctl", "-n", key])
    }

    /// Run iptables-legacy inside the router (rules disappear with the namespace).
    pub fn iptables(&self, args: &[&str]) -> io::Result<()> {
        self.iptables_in(&self.router, args)
    }

    /// Run iptables-legacy, and ip6tables-legacy when the topology has IPv6, inside namespace
    /// `ns` (rules disappear with the namespace).
    pub fn iptables_in(&self, ns: &str, args: &[&str]) -> io::Result<()> {
        let tools: &[&str] = if self.ipv6 {
            &["iptables-legacy", "ip6tables-legacy"]
        } else {
            &["iptables-legacy"]
        };
        for tool in tools {
            let mut a = vec!["netns", "exec", ns, tool];
            a.extend_from_slice(args);
            os::run("ip", &a)?;
        }
        Ok(())
    }

    fn restore_sysctls(&mut self) -> io::Result<()> {
        let mut first_err = None;
        for (key, old) in self.restored.drain(..) {
            if let Err(e) = fs::write(sysctl_path(&key), &old) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Undo everything; errors are reported, and every step is tried.
    pub fn destroy(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        if let Err(e) = self.restore_sysctls() {
            errors.push(format!("restoring sysctls: {e}"));
        }
        for ns in self.namespaces.drain(..).rev() {
            if let Err(e) = os::run("ip", &["netns", "delete", &ns]) {
                errors.push(e.to_string());
            }
        }
        if errors.is_empty() {
            let _ = fs::remove_file(&self.state);
        }
        errors
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for e in self.destroy() {
            eprintln!("tcpwhy lab: cleanup: {e}");
        }
    }
}

/// The state file `twlab<pid>x<n>.state` belongs to a process that is still running tcpwhy.
fn owner_alive(state: &std::path::Path) -> bool {
    let Some(stem) = state.file_stem().and_then(|s| s.to_str()) else {
        return false;
    };
    let Some(pid) = stem.strip_prefix(PREFIX).and_then(|r| r.split('x').next()) else {
        return false;
    };
    if pid.parse::<u32>().is_err() || pid == std::process::id().to_string() {
        return false;
    }
    fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("tcpwhy"))
}

/// `tcpwhy lab clean`: undo every run recorded in the state directory (runs killed before
/// they could clean up). Touches only namespaces and sysctls named in those files.
pub fn clean_all() -> io::Result<Vec<String>> {
    let mut done = Vec::new();
    let dir = match fs::read_dir(STATE_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(done),
        Err(e) => return Err(e),
    };
    let existing = os::run("ip", &["netns", "list"]).unwrap_or_default();
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|x| x != "state") {
            continue;
        }
        if owner_alive(&path) {
            // A run in progress cleans up after itself.
            continue;
        }
        let text = fs::read_to_string(&path)?;
        let mut ok = true;
        // Sysctls first (in reverse), then namespaces.
        for line in text.lines().rev() {
            let mut parts = line.splitn(3, ' ');
            match (parts.next(), parts.next(), parts.next()) {
                (Some("sysctl"), Some(key), Some(old)) if key.starts_with("net.") => {
                    match fs::write(sysctl_path(key), old) {
                        Ok(()) => done.push(format!("restored {key} = {old}")),
                        Err(e) => {
                            ok = false;
                            done.push(format!("could not restore {key}: {e}"));
                        }
                    }
                }
                (Some("netns"), Some(name), None) if name.starts_with(PREFIX) => {
                    let present = existing
                        .lines()
                        .any(|l| l.split_whitespace().next() == Some(name));
                    if present {
                        match os::run("ip", &["netns", "delete", name]) {
                            Ok(_) => done.push(format!("deleted namespace {name}")),
                            Err(e) => {
                                ok = false;
                                done.push(format!("could not delete {name}: {e}"));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if ok {
            fs::remove_file(&path)?;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_lab_only_and_parse() {
        for a in [
            CLIENT_ADDR,
            ROUTER_CLIENT_SIDE,
            ROUTER_MID_SIDE,
            MID_ROUTER_SIDE,
            MID_SERVER_SIDE,
            SERVER_ADDR,
        ] {
            let ip: std::net::Ipv4Addr = a.parse().expect(a);
            assert!(ip.is_private(), "{a}");
        }
        for a in [
            CLIENT_ADDR6,
            ROUTER_CLIENT_SIDE6,
            ROUTER_MID_SIDE6,
            MID_ROUTER_SIDE6,
            MID_SERVER_SIDE6,
            SERVER_ADDR6,
        ] {
            let ip: std::net::Ipv6Addr = a.parse().expect(a);
            // Unique local (fd00::/8).
            assert_eq!(ip.segments()[0] & 0xff00, 0xfd00, "{a}");
        }
        assert_eq!(parse_ip(SERVER_ADDR6).to_string(), SERVER_ADDR6);
        assert_eq!(parse_ip(CLIENT_ADDR).to_string(), CLIENT_ADDR);
    }
}
