//! Live capture with an AF_PACKET socket (Linux), and a small pcap writer: the inputs and
//! outputs that are not files to read. `tcpwhy analyze --interface` analyses what it
//! captures; the lab records each scenario on a veth with it.
//!
//! One `recvmsg` per frame, kernel timestamps (SO_TIMESTAMPNS), original lengths (MSG_TRUNC).
//! Both directions of the chosen interface are seen once each.

use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, LinkAddr, MsgFlags};
use socket2::{Domain, Protocol, Socket, Type};
use std::fs::File;
use std::io::{self, BufWriter, IoSliceMut, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// ETH_P_ALL (linux/if_ether.h): every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// linux/if_arp.h and linux/if_packet.h.
const ARPHRD_LOOPBACK: u16 = 772;
const PACKET_OUTGOING: u8 = 4;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;

pub struct LiveCapture {
    sock: Socket,
    ifindex: Option<usize>,
    buf: Vec<u8>,
    cmsg: Vec<u8>,
}

/// One captured frame; `data` is the whole frame (up to 64 KiB).
pub struct LivePacket<'a> {
    pub ts_ns: i64,
    pub data: &'a [u8],
    pub orig_len: u32,
    pub ifindex: usize,
    /// Link type of the frame: Ethernet for Ethernet and loopback devices, raw IP for
    /// devices without a link header (tun, ARPHRD_NONE).
    pub link: tcpwhy_wire::LinkType,
}

/// ARPHRD_* (linux/if_arp.h) to the pcap link type of the frames an AF_PACKET socket returns.
fn link_of(hatype: u16) -> tcpwhy_wire::LinkType {
    match hatype {
        // ARPHRD_NONE, ARPHRD_RAWIP: no link header.
        0xFFFE | 519 => tcpwhy_wire::LinkType::RAW,
        // ARPHRD_ETHER, ARPHRD_LOOPBACK (a zeroed Ethernet header), and anything else.
        _ => tcpwhy_wire::LinkType::ETHERNET,
    }
}

impl LiveCapture {
    /// Capture on `iface` (all interfaces when `None`) of the calling thread's network
    /// namespace. Needs CAP_NET_RAW.
    pub fn open(iface: Option<&str>) -> io::Result<LiveCapture> {
        let ifindex = match iface {
            Some(name) => Some(nix::net::if_::if_nametoindex(name).map_err(|e| {
                io::Error::new(io::ErrorKind::NotFound, format!("interface {name}: {e}"))
            })? as usize),
            None => None,
        };
        let sock = Socket::new(
            Domain::PACKET,
            Type::RAW,
            Some(Protocol::from(i32::from(ETH_P_ALL.to_be()))),
        )
        .map_err(|e| {
            if e.kind() == io::ErrorKind::PermissionDenied {
                io::Error::new(e.kind(), "capturing needs root (CAP_NET_RAW)")
            } else {
                e
            }
        })?;
        setsockopt(&sock, sockopt::ReceiveTimestampns, &true).map_err(io::Error::from)?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        // Room for bursts while the writer catches up.
        let _ = sock.set_recv_buffer_size(8 << 20);
        Ok(LiveCapture {
            sock,
            ifindex,
            buf: vec![0; 65536],
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
        })
    }

    /// The next frame, or `None` when nothing arrived within about 50 ms.
    #[allow(clippy::should_implement_trait)] // a lending iterator: `Iterator` cannot express it
    pub fn next(&mut self) -> io::Result<Option<LivePacket<'_>>> {
        loop {
            let (len, ts, ifindex, hatype, pkttype) = {
                let mut iov = [IoSliceMut::new(&mut self.buf)];
                let msg = match recvmsg::<LinkAddr>(
                    self.sock.as_raw_fd(),
                    &mut iov,
                    Some(&mut self.cmsg),
                    MsgFlags::MSG_TRUNC,
                ) {
                    Ok(m) => m,
                    Err(nix::errno::Errno::EAGAIN) => return Ok(None),
                    Err(nix::errno::Errno::EINTR) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                let mut ts = None;
                if let Ok(cmsgs) = msg.cmsgs() {
                    for c in cmsgs {
                        if let ControlMessageOwned::ScmTimestampns(t) = c {
                            ts = Some(t.tv_sec() * 1_000_000_000 + t.tv_nsec());
                        }
                    }
                }
                let ifindex = msg.address.map_or(0, |a| a.ifindex());
                let hatype = msg.address.map_or(1, |a| a.hatype());
                let pkttype = msg.address.map_or(0, |a| a.pkttype());
                (msg.bytes, ts, ifindex, hatype, pkttype)
            };
            // On loopback every packet passes twice, going out and coming in; keep one copy
            // (as libpcap does).
            if hatype == ARPHRD_LOOPBACK && pkttype == PACKET_OUTGOING {
                continue;
            }
            if self.ifindex.is_some_and(|i| i != ifindex) {
                continue;
            }
            let ts_ns = ts.unwrap_or_else(now_ns);
            let caplen = len.min(self.buf.len());
            return Ok(Some(LivePacket {
                ts_ns,
                data: &self.buf[..caplen],
                orig_len: len as u32,
                ifindex,
                link: link_of(hatype),
            }));
        }
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Creates (or empties) the file `path` for writing, refusing a symbolic link as its last
/// component (ELOOP): the lab runs as root, and a link another user planted in a shared
/// directory would otherwise have root overwrite the link's target.
pub fn create_no_follow(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path)
}

/// Writes a nanosecond-resolution pcap.
pub struct PcapWriter {
    out: BufWriter<File>,
    snaplen: u32,
    pub packets: u64,
}

impl PcapWriter {
    pub fn create(path: &Path, snaplen: u32, linktype: u32) -> io::Result<PcapWriter> {
        let mut out = BufWriter::new(create_no_follow(path)?);
        // pcap header: nanosecond magic, version 2.4, zone 0, sigfigs 0, snaplen, link type.
        for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, snaplen, linktype] {
            out.write_all(&v.to_le_bytes())?;
        }
        Ok(PcapWriter {
            out,
            snaplen,
            packets: 0,
        })
    }

    pub fn write(&mut self, ts_ns: i64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let caplen = data.len().min(self.snaplen as usize);
        let sec = ts_ns.div_euclid(1_000_000_000) as u32;
        let nsec = ts_ns.rem_euclid(1_000_000_000) as u32;
        for v in [sec, nsec, caplen as u32, orig_len] {
            self.out.write_all(&v.to_le_bytes())?;
        }
        self.out.write_all(&data[..caplen])?;
        self.packets += 1;
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<u64> {
        self.out.flush()?;
        Ok(self.packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted where a capture is to be written is refused, and its target is left
    /// as it was; a plain file there is emptied and rewritten.
    #[test]
    fn a_capture_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").expect("write the victim");
        let link = dir.path().join("stale-syn-timewait-broken.pcap");
        std::os::unix::fs::symlink(&victim, &link).expect("plant the link");
        let e = PcapWriter::create(&link, 128, 1)
            .err()
            .expect("the link must be refused");
        assert_eq!(e.raw_os_error(), Some(nix::libc::ELOOP), "{e}");
        assert_eq!(std::fs::read(&victim).ok(), Some(b"precious".to_vec()));

        let plain = dir.path().join("plain.pcap");
        std::fs::write(&plain, vec![9u8; 1000]).expect("an earlier capture");
        let w = PcapWriter::create(&plain, 128, 1).expect("a plain file is rewritten");
        drop(w);
        let bytes = std::fs::read(&plain).expect("read it back");
        assert_eq!(bytes.len(), 24, "only the new pcap header");
        assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    }
}
