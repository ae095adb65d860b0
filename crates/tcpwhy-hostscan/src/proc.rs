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

/// `/proc/net/softnet_stat`: one line per CPU of hexadecimal columns, the first three being
/// packets processed, packets dropped because the CPU's input backlog
/// (net.core.netdev_max_backlog) was full, and times the receive softirq ran out of budget
/// (net.core.netdev_budget) with packets left. Returns their sums over the CPUs as
/// `Softnet.Processed`, `Softnet.Dropped` and `Softnet.TimeSqueeze`; a line whose first three
/// columns are not all hexadecimal is skipped. The counts are the host's, the same in every
/// network namespace, and 32 bits per CPU: a wrapped sum shows as no increase.
pub fn softnet(text: &str) -> BTreeMap<String, u64> {
    let mut sums = [0u64; 3];
    let mut lines = 0;
    for line in text.lines() {
        let cols: Vec<u64> = line
            .split_whitespace()
            .take(3)
            .map_while(|w| u64::from_str_radix(w, 16).ok())
            .collect();
        if let [a, b, c] = cols[..] {
            sums[0] += a;
            sums[1] += b;
            sums[2] += c;
            lines += 1;
        }
    }
    if lines == 0 {
        return BTreeMap::new();
    }
    ["Processed", "Dropped", "TimeSqueeze"]
        .iter()
        .zip(sums)
        .map(|(n, v)| (format!("Softnet.{n}"), v))
        .collect()
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
    fn softnet_sums_over_cpus() {
        // This machine's two CPUs (columns after the third shortened).
        let s = softnet(
            "0186f87a 000000eb 00000026 00000000 0000c162\n00b4c74f 00000173 00000000 00000000 00000000\n",
        );
        assert_eq!(s["Softnet.Processed"], 0x0186_f87a + 0x00b4_c74f);
        assert_eq!(s["Softnet.Dropped"], 0xeb + 0x173);
        assert_eq!(s["Softnet.TimeSqueeze"], 0x26);
        // A short or non-hexadecimal line is skipped; nothing readable gives no counters.
        let s = softnet("00000010 00000002\nzz 1 2\n00000001 00000001 00000000\n");
        assert_eq!(s["Softnet.Dropped"], 1);
        assert!(softnet("").is_empty());
        assert!(softnet("x y z\n").is_empty());
    }

    #[test]
    fn sysctl_integers() {
        assert_eq!(ints("32768\t60999\n"), [32768, 60999]);
        assert_eq!(ints("-262144\n"), [-262144]);
        assert!(ints("cubic\n").is_empty());
    }
}
