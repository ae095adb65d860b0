#!/usr/bin/env python3
"""Build pcapng-tsoffset.pcapng, a fuzz seed: one TCP connection (handshake, a request, an
ACK, FIN both ways, the last ACK) seen on two interfaces, both at ns resolution. Interface 0
has no offset (times in 2023); interface 1's if_tsoffset is -2^62 s, so its packets fall
before 1970. It starts the fuzzers on the interface-options paths that a corpus without
if_tsoffset never reached (times 146 000 years apart overflowed every difference).

    python3 fuzz/seeds/pcapng_tsoffset.py fuzz/seeds/pcapng-tsoffset.pcapng
"""
import struct
import sys


def block(kind, body):
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", kind, n) + body + struct.pack("<I", n)


def idb(offset_sec):
    opts = struct.pack("<HHB3x", 9, 1, 9)  # if_tsresol: 10^-9
    opts += struct.pack("<HHq", 14, 8, offset_sec)  # if_tsoffset
    opts += struct.pack("<HH", 0, 0)
    return block(1, struct.pack("<HHI", 1, 0, 0) + opts)


def frame(src, dst, sport, dport, seq, ack, flags, payload=0):
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + payload, 1, 0, 64, 6, 0,
                     bytes(src), bytes(dst))
    return b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01\x08\x00" + ip + tcp + b"\0" * payload


def epb(iface, ts, data):
    head = struct.pack("<IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
    return block(6, head + data)


def main(out):
    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    c, s = [10, 0, 0, 1], [10, 0, 0, 2]
    t = 1_700_000_000 * 10**9
    ms = 10**6
    packets = [
        (0, t, frame(c, s, 1000, 80, 100, 0, 0x02)),
        (1, 5, frame(s, c, 80, 1000, 7000, 101, 0x12)),
        (0, t + ms, frame(c, s, 1000, 80, 101, 7001, 0x10)),
        (0, t + 2 * ms, frame(c, s, 1000, 80, 101, 7001, 0x18, 100)),
        (1, 10, frame(s, c, 80, 1000, 7001, 201, 0x10)),
        (1, t, frame(s, c, 80, 1000, 7001, 201, 0x11)),
        (0, t + 3 * ms, frame(c, s, 1000, 80, 201, 7002, 0x11)),
    ]
    data = shb + idb(0) + idb(-(1 << 62))
    for iface, ts, f in packets:
        data += epb(iface, ts, f)
    with open(out, "wb") as fh:
        fh.write(data)


if __name__ == "__main__":
    main(sys.argv[1])
