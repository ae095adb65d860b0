//! /proc parsers: pure functions over the text, so they are tested on real text copied from
//! this machine. Unknown lines and fields are ignored; malformed numbers are skipped.

use std::collections::BTreeMap;

/// `/proc/net/netstat` and `/proc/net/snmp`: pairs of lines `Prefix: names...` /
/// `Prefix: values...`. Returns `Prefix.Name -> value` (e.g. `TcpExt.ListenDrops`).
pub fn counters(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let (Some((p1, names)), Some((p2, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        if p1 != p2 {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            // Tcp.MaxConn is -1: counters are unsigned, skip what is not.
            if let Ok(v) = v.parse::<u64>() {
                out.insert(format!("{p1}.{n}"), v);
            }
        }
    }
    out
}

/// `/proc/net/sockstat`: `TCP: inuse 5 orphan 0 tw 3 alloc 8 mem 1` -> `TCP.tw -> 3` etc.
pub fn sockstat(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((proto, rest)) = line.split_once(':') else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        for pair in words.chunks(2) {
            if let [k, v] = pair {
                if let Ok(v) = v.parse::<u64>() {
                    out.insert(format!("{proto}.{k}"), v);
                }
            }
        }
    }
    out
}

/// A sysctl value as the first integer of the text (`ip_local_port_range` has two).
pub fn ints(text: &str) -> Vec<i64> {
    text.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Copied from this machine's /proc/net/netstat (shortened) and /proc/net/snmp.
    const NETSTAT: &str = "TcpExt: SyncookiesSent SyncookiesRecv PAWSActive PAWSEstab ListenOverflows ListenDrops TCPTimeouts TCPChallengeACK TCPSYNChallenge TCPACKSkippedTimeWait\n\
TcpExt: 0 0 2 5 7 9 11 13 17 19\n\
IpExt: InNoRoutes InTruncatedPkts\n\
IpExt: 0 0\n";
    const SNMP: &str = "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens\n\
Tcp: 1 200 120000 -1 2103 2098\n";

    #[test]
    fn counters_by_prefix_and_name() {
        let c = counters(NETSTAT);
        assert_eq!(c["TcpExt.ListenDrops"], 9);
        assert_eq!(c["TcpExt.TCPACKSkippedTimeWait"], 19);
        assert_eq!(c["IpExt.InNoRoutes"], 0);
        let s = counters(SNMP);
        assert_eq!(s["Tcp.ActiveOpens"], 2103);
        assert!(!s.contains_key("Tcp.MaxConn"), "-1 is not a counter");
        // Garbage, a names line without values, mismatched prefixes: nothing, no panic.
        assert!(counters("TcpExt: A B\nIpExt: 1 2\n").is_empty());
        assert!(counters("TcpExt: A B\n").is_empty());
        assert!(counters("\u{0}\u{1}: x\n:\n").is_empty());
    }

    #[test]
    fn sockstat_pairs() {
        let s = sockstat(
            "sockets: used 9\nTCP: inuse 1 orphan 0 tw 4 alloc 1 mem 93\nUDP: inuse 0 mem 0\n",
        );
        assert_eq!(s["TCP.tw"], 4);
        assert_eq!(s["TCP.inuse"], 1);
        assert_eq!(s["sockets.used"], 9);
        assert!(sockstat("TCP: inuse x tw").is_empty());
    }

    #[test]
    fn sysctl_integers() {
        assert_eq!(ints("32768\t60999\n"), [32768, 60999]);
        assert_eq!(ints("-262144\n"), [-262144]);
        assert!(ints("cubic\n").is_empty());
    }
}
