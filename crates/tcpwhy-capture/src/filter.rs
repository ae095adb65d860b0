//! Capture filters with tcpdump's meaning (`host 10.0.0.5 and port 443`), compiled by
//! libpcap's own compiler (through the `pcap` crate) and run on each frame as libpcap runs
//! them on a savefile (`pcap_offline_filter`).
//!
//! libpcap compiles an expression for one link type (the offsets of the IP header differ), and
//! a pcapng file or several inputs can carry several: the expression is compiled once per link
//! type met, when its first frame arrives. Where libpcap filters the frame as tcpdump does on
//! a file (Ethernet, Linux cooked v1 and v2, raw IP, PPP, IPNET), the program runs on the
//! frame. Elsewhere it runs on the IP packet the link layer carries, compiled for raw IP:
//! libpcap cannot compile for NFLOG or PKTAP, and for BSD loopback (NULL, LOOP) a program made
//! without a file tests the address family of this host only, where a file may hold any
//! BSD's; frames without IP are then not selected. An expression that does not compile for Ethernet
//! is refused before any packet is read; one that compiles there but not for a link type met
//! later (`ether host` on a raw-IP capture) stops the run with libpcap's words.
//!
//! The frame's length handed to the program is its captured length, so `greater`/`less`
//! compare the captured bytes (tcpdump compares the length on the wire; they differ only on
//! frames cut by the snaplen).

use pcap::{BpfProgram, Capture, Linktype};
use tcpwhy_wire::LinkType;

/// A compiled capture filter.
pub struct Filter {
    expression: String,
    /// One compiled program per link type met, or libpcap's reason it does not compile there.
    programs: Vec<(u32, Result<BpfProgram, String>)>,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("expression", &self.expression)
            .finish_non_exhaustive()
    }
}

impl Filter {
    /// Compile `expression` for Ethernet to check its syntax; the programs for the link types
    /// of the capture are compiled as they are met. The error is libpcap's message.
    pub fn new(expression: &str) -> Result<Filter, String> {
        let mut filter = Filter {
            expression: expression.to_string(),
            programs: Vec::new(),
        };
        filter.program(LinkType::ETHERNET)?;
        Ok(filter)
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether the frame `data` of link type `link` matches. The error says why the expression
    /// cannot be compiled for this link type.
    pub fn matches(&mut self, link: LinkType, data: &[u8]) -> Result<bool, String> {
        if on_frame(link) {
            return Ok(self.program(link)?.filter(data));
        }
        let program = self.program(LinkType::DLT_RAW_12)?;
        Ok(tcpwhy_wire::ip_offset(link, data)
            .and_then(|at| data.get(at..))
            .is_some_and(|ip| program.filter(ip)))
    }

    fn program(&mut self, link: LinkType) -> Result<&BpfProgram, String> {
        let i = match self.programs.iter().position(|(l, _)| *l == link.0) {
            Some(i) => i,
            None => {
                let compiled = compile(&self.expression, link);
                self.programs.push((link.0, compiled));
                self.programs.len() - 1
            }
        };
        match &self.programs[i].1 {
            Ok(p) => Ok(p),
            Err(e) => Err(e.clone()),
        }
    }
}

/// The link types whose frames libpcap filters as tcpdump filters them in a file.
fn on_frame(link: LinkType) -> bool {
    matches!(
        link,
        LinkType::ETHERNET
            | LinkType::LINUX_SLL
            | LinkType::LINUX_SLL2
            | LinkType::RAW
            | LinkType::DLT_RAW_12
            | LinkType::DLT_RAW_14
            | LinkType::IPV4
            | LinkType::IPV6
            | LinkType::PPP
            | LinkType::IPNET
    )
}

fn compile(expression: &str, link: LinkType) -> Result<BpfProgram, String> {
    // libpcap's compiler takes DLT_ numbers; the files carry LINKTYPE_ numbers, which differ
    // for raw IP (LINKTYPE_RAW 101 is DLT_RAW, 12 on Linux).
    let dlt = match link {
        LinkType::RAW | LinkType::DLT_RAW_14 => LinkType::DLT_RAW_12.0,
        l => l.0,
    };
    let dlt = i32::try_from(dlt).map_err(|_| format!("link type {} out of range", link.0))?;
    let dead = Capture::dead(Linktype(dlt)).map_err(|e| e.to_string())?;
    dead.compile(expression, true).map_err(|e| match e {
        pcap::Error::PcapError(m) => m,
        e => e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet frame carrying IPv4/TCP from 10.0.0.1:40000 to 10.0.0.5:443, SYN, built
    /// byte by byte (checksums zero: a filter does not look at them).
    fn frame(vlan: Option<u16>) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        if let Some(id) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&id.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 5]);
        f.extend_from_slice(&40000u16.to_be_bytes());
        f.extend_from_slice(&443u16.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        f
    }

    #[test]
    fn selects_what_tcpdump_would() {
        let eth = frame(None);
        let cases = [
            ("host 10.0.0.5 and port 443", true),
            ("src host 10.0.0.5", false),
            ("dst host 10.0.0.5 and src port 40000", true),
            ("net 10.0.0.0/8 and tcp", true),
            ("portrange 400-500", true),
            ("ip6 or udp", false),
            ("not (port 80 or port 8080)", true),
            ("vlan", false),
        ];
        for (expr, want) in cases {
            let mut f = Filter::new(expr).expect(expr);
            assert_eq!(
                f.matches(LinkType::ETHERNET, &eth),
                Ok(want),
                "{expr} on Ethernet"
            );
        }
        // The same IPv4 packet without its Ethernet header, as a raw-IP capture holds it.
        let mut f = Filter::new("host 10.0.0.5 and port 443").expect("compiles");
        assert_eq!(f.matches(LinkType::RAW, &eth[14..]), Ok(true));
        assert_eq!(f.matches(LinkType::RAW, &eth), Ok(false));
        // Behind an 802.1Q tag: `vlan 7` matches and moves the offsets past the tag.
        let tagged = frame(Some(7));
        let mut f = Filter::new("vlan 7 and port 443").expect("compiles");
        assert_eq!(f.matches(LinkType::ETHERNET, &tagged), Ok(true));
        let mut f = Filter::new("vlan 8").expect("compiles");
        assert_eq!(f.matches(LinkType::ETHERNET, &tagged), Ok(false));
    }

    #[test]
    fn refuses_what_libpcap_cannot_compile() {
        let e = Filter::new("host and port").expect_err("no address");
        assert!(e.contains("syntax error"), "{e}");
        // Ethernet addresses mean nothing on a raw-IP link.
        let mut f = Filter::new("ether host 2:0:0:0:0:1").expect("compiles for Ethernet");
        let e = f
            .matches(LinkType::RAW, &[0x45])
            .expect_err("not on raw IP");
        assert!(e.contains("ethernet addresses supported only on"), "{e}");
    }
}
