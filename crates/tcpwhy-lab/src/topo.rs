//! The lab's topology: three network namespaces, client -- router -- server, joined by veth
//! pairs, and everything needed to undo it.
//!
//! Every namespace and every change outside them is written to a state file under
//! [`STATE_DIR`] *before* it is made, so `tcpwhy lab clean` can undo a run that was killed with
//! SIGKILL. Dropping a [`Topology`] undoes it (on success, failure, panic or Ctrl-C).

use crate::os;
use std::fs;
use std::io::{self, Write};
use std::path::PathBuf;

pub const STATE_DIR: &str = "/run/tcpwhy-lab";
/// Every lab namespace name starts with this; `lab clean` touches only names it recorded.
pub const PREFIX: &str = "twlab";

/// Addresses exist only inside the lab's namespaces (RFC 1918, chosen to be unusual).
pub const CLIENT_ADDR: &str = "10.201.1.2";
pub const ROUTER_CLIENT_SIDE: &str = "10.201.1.1";
pub const ROUTER_SERVER_SIDE: &str = "10.201.2.1";
pub const SERVER_ADDR: &str = "10.201.2.2";
/// Interface names inside the namespaces (names are per namespace, so runs never collide).
pub const CLIENT_IF: &str = "c0";
pub const ROUTER_CLIENT_IF: &str = "rc0";
pub const ROUTER_SERVER_IF: &str = "rs0";
pub const SERVER_IF: &str = "s0";

/// Options that must be set before the namespaces exist.
#[derive(Clone, Debug, Default)]
pub struct TopologyOptions {
    /// Give the server namespace its own established-hash table of this many buckets
    /// (net.ipv4.tcp_child_ehash_entries in the parent namespace while it is created).
    pub server_ehash_entries: Option<u32>,
}

pub struct Topology {
    pub id: String,
    pub client: String,
    pub router: String,
    pub server: String,
    state: PathBuf,
    /// Sysctls of the parent namespace changed, with their values before.
    restored: Vec<(String, String)>,
    namespaces: Vec<String>,
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
            server: format!("{id}-s"),
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
        let (client, router) = (t.client.clone(), t.router.clone());
        t.add_netns(&client)?;
        t.add_netns(&router)?;
        t.wire()?;
        Ok(t)
    }

    fn add_netns(&mut self, name: &str) -> io::Result<()> {
        record(&self.state, &format!("netns {name}"))?;
        os::run("ip", &["netns", "add", name])?;
        self.namespaces.push(name.to_string());
        // IPv4 only: no router solicitations or MLD reports in the captures.
        for key in [
            "net.ipv6.conf.all.disable_ipv6",
            "net.ipv6.conf.default.disable_ipv6",
        ] {
            self.sysctl(name, key, "1")?;
        }
        os::run("ip", &["-n", name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    fn wire(&self) -> io::Result<()> {
        let (c, r, s) = (&self.client, &self.router, &self.server);
        os::run(
            "ip",
            &[
                "-n",
                c,
                "link",
                "add",
                CLIENT_IF,
                "type",
                "veth",
                "peer",
                "name",
                ROUTER_CLIENT_IF,
                "netns",
                r,
            ],
        )?;
        os::run(
            "ip",
            &[
                "-n",
                s,
                "link",
                "add",
                SERVER_IF,
                "type",
                "veth",
                "peer",
                "name",
                ROUTER_SERVER_IF,
                "netns",
                r,
            ],
        )?;
        for (ns, ifname, addr) in [
            (c, CLIENT_IF, CLIENT_ADDR),
            (r, ROUTER_CLIENT_IF, ROUTER_CLIENT_SIDE),
            (r, ROUTER_SERVER_IF, ROUTER_SERVER_SIDE),
            (s, SERVER_IF, SERVER_ADDR),
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
            os::run(
                "ip",
                &["-n", ns, "link", "set", ifname, "mtu", "1500", "up"],
            )?;
            // Wire-sized packets in the captures: no segmentation or receive offloads.
            os::run(
                "ip",
                &[
                    "netns", "exec", ns, "ethtool", "-K", ifname, "tso", "off", "gso", "off",
                    "gro", "off",
                ],
            )?;
        }
        for (ns, via) in [(c, ROUTER_CLIENT_SIDE), (s, ROUTER_SERVER_SIDE)] {
            os::run("ip", &["-n", ns, "route", "add", "default", "via", via])?;
        }
        self.sysctl(r, "net.ipv4.ip_forward", "1")?;
        Ok(())
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
        let mut a = vec!["netns", "exec", &self.router, "iptables-legacy"];
        a.extend_from_slice(args);
        os::run("ip", &a).map(|_| ())
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
