"""Files per second through the command line, the Python package and the Ray recipe (issue 29's
numbers; a benchmark that prints numbers, not a test).

    python3 bench/fleet.py [--ray] 'fixtures/lab/*.pcap*' 'fixtures/lab/vantage/*.pcap*'

CLI: `tcpwhy analyze --format parquet -o DIR FILE` per file (a process each, as a shell loop
over a directory would run it); Python: `tcpwhy.analyze(FILE)` per file in this process; with
--ray, the Ray recipe on a local cluster of 1 and then 2 nodes of one CPU each (started here
on 127.0.0.1 and stopped after). Best of 3 rounds each.
"""
import glob
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "ray"))
BIN = os.environ.get("TCPWHY_BIN", str(ROOT / "target" / "release" / "tcpwhy"))


def best(f, rounds=3):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    use_ray = "--ray" in sys.argv
    files = sorted(p for a in sys.argv[1:] if a != "--ray" for p in glob.glob(a))
    size = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"{len(files)} captures, {size:.1f} MB")

    def cli():
        with tempfile.TemporaryDirectory() as d:
            for i, f in enumerate(files):
                subprocess.run([BIN, "analyze", "-q", "--format", "parquet", "-o",
                                f"{d}/{i}", f], check=False)

    import tcpwhy

    def python():
        for f in files:
            try:
                tcpwhy.analyze(f)
            except ValueError:
                pass

    for name, f in [("CLI, a process per file", cli), ("Python package, in process", python)]:
        t = best(f)
        print(f"{name:<34} {t:7.2f} s  {len(files) / t:6.1f} files/s  {size / t:6.1f} MB/s")
    if not use_ray:
        return
    import rank
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    for nodes in (1, 2):
        subprocess.run(["ray", "start", "--head", "--node-ip-address=127.0.0.1", "--port=6379",
                        "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats"],
                       env=env, capture_output=True, check=True)
        if nodes == 2:
            subprocess.run(["ray", "start", "--address=127.0.0.1:6379",
                            "--node-ip-address=127.0.0.1", "--num-cpus=1"],
                           env=env, capture_output=True, check=True)
        try:
            t = best(lambda: rank.rank(files))
        finally:
            subprocess.run(["ray", "stop", "--force"], env=env, capture_output=True)
        print(f"{'Ray Data, %d node(s) of 1 CPU' % nodes:<34} {t:7.2f} s  "
              f"{len(files) / t:6.1f} files/s  {size / t:6.1f} MB/s")


if __name__ == "__main__":
    main()
