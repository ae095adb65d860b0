#!/usr/bin/env python3
"""Traffic for the benchmark capture (bench/capture.sh). Runs inside the two network
namespaces the script created; talks only to the peer namespace's address. Every loop is
bounded in count and every socket has a timeout.

  server mode:  traffic.py server BIND_ADDR READY_FILE SECONDS
  client mode:  traffic.py client SERVER_ADDR SHORT BULK_MB PERSISTENT WORKERS

Client: SHORT short connections (100-byte request, 1000-byte response, FIN both ways) spread
over WORKERS processes; BULK_MB megabytes in 4 bulk downloads (paced, 30 MB/s each); PERSISTENT connections doing a
request/response every 20 ms while the short connections run.
"""
import os, socket, sys, threading, time

TIMEOUT = 10
BULK_RATE = 30e6  # bytes per second per bulk download


def serve_short(ls):
    while True:
        try:
            s, _ = ls.accept()
        except OSError:
            return
        try:
            s.settimeout(TIMEOUT)
            if s.recv(100):
                s.sendall(b"r" * 1000)
        except OSError:
            pass
        s.close()


def serve_bulk(ls):
    while True:
        try:
            s, _ = ls.accept()
        except OSError:
            return
        def one(s=s):
            try:
                s.settimeout(TIMEOUT)
                n = int(s.recv(32).decode().strip() or "0")
                chunk = b"b" * 65536
                # Paced (BULK_RATE per stream) so that tcpdump, sharing the two cores, keeps
                # up: the benchmark capture must not have kernel drops.
                start = time.monotonic()
                for i in range(min(n, 1 << 16)):
                    s.sendall(chunk)
                    ahead = start + (i + 1) * len(chunk) / BULK_RATE - time.monotonic()
                    if ahead > 0:
                        time.sleep(ahead)
            except (OSError, ValueError):
                pass
            s.close()
        threading.Thread(target=one, daemon=True).start()


def serve_persistent(ls):
    while True:
        try:
            s, _ = ls.accept()
        except OSError:
            return
        def one(s=s):
            s.settimeout(TIMEOUT)
            try:
                for _ in range(1_000_000):
                    if not s.recv(64):
                        break
                    s.sendall(b"p" * 200)
            except OSError:
                pass
            s.close()
        threading.Thread(target=one, daemon=True).start()


def server(addr, ready, seconds):
    socks = []
    for port, fn in ((8001, serve_short), (8002, serve_bulk), (8003, serve_persistent)):
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((addr, port))
        ls.listen(4096)
        socks.append(ls)
        for _ in range(4 if port == 8001 else 1):
            threading.Thread(target=fn, args=(ls,), daemon=True).start()
    open(ready, "w").close()
    time.sleep(seconds)


def short_worker(addr, n):
    for _ in range(n):
        try:
            s = socket.create_connection((addr, 8001), timeout=TIMEOUT)
            s.sendall(b"q" * 100)
            got = 0
            for _ in range(100):
                b = s.recv(4096)
                if not b:
                    break
                got += len(b)
            s.close()
        except OSError:
            time.sleep(0.001)


def client(addr, short, bulk_mb, persistent, workers):
    stop = threading.Event()

    def pers():
        try:
            s = socket.create_connection((addr, 8003), timeout=TIMEOUT)
            for _ in range(100_000):
                if stop.is_set():
                    break
                s.sendall(b"ping")
                s.recv(4096)
                time.sleep(0.02)
            s.close()
        except OSError:
            pass

    def bulk(mb):
        try:
            s = socket.create_connection((addr, 8002), timeout=TIMEOUT)
            s.sendall(str(mb * 16).encode() + b"\n")
            for _ in range(1 << 22):
                if not s.recv(1 << 16):
                    break
            s.close()
        except OSError:
            pass

    threads = [threading.Thread(target=pers) for _ in range(persistent)]
    threads += [threading.Thread(target=bulk, args=(max(1, bulk_mb // 4),)) for _ in range(4)]
    for t in threads:
        t.start()
    pids = []
    for w in range(workers):
        pid = os.fork()
        if pid == 0:
            short_worker(addr, short // workers)
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    stop.set()
    for t in threads:
        t.join(TIMEOUT)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
