"""Files per second through the command line, the Python package and the Ray and Spark recipes
(issue 29's numbers; a benchmark that prints numbers, not a test).

    python3 bench/fleet.py [--ray] [--spark] 'fixtures/lab/*.pcap*' 'fixtures/lab/vantage/*.pcap*'

CLI: `tcpwhy analyze --format parquet -o DIR FILE` per file (a process each, as a shell loop
over a directory would run it); Python: `tcpwhy.analyze(FILE)` per file in this process; with
--ray, the Ray recipe on a local cluster of 1 and then 2 nodes of one CPU each (started here
on 127.0.0.1 and stopped after); with --spark, the Spark recipe on `local-cluster[N,1,1024]`
with 1 and then 2 executors of one core (a session each, started before the rounds: its start
is printed, not counted); --ray-threads1 and --spark-threads1 the same with `threads=1` per
analysis (one tracking thread: an analysis then uses about one core). Best of 3 rounds each.
"""
import glob
import importlib.util
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


def load(name, path):
    """The Python file `path` as module `name` (both recipes are called rank.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main():
    use_ray = "--ray" in sys.argv
    use_spark = "--spark" in sys.argv
    files = sorted(p for a in sys.argv[1:] if not a.startswith("--") for p in glob.glob(a))
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
    if use_ray:
        ray_rank(files, size)
    if "--ray-threads1" in sys.argv:
        ray_rank(files, size, {"threads": 1})
    if use_spark:
        spark_rank(files, size)
    if "--spark-threads1" in sys.argv:
        spark_rank(files, size, {"threads": 1})


def ray_rank(files, size, options=None):
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
            t = best(lambda: rank.rank(files, options=options))
        finally:
            subprocess.run(["ray", "stop", "--force"], env=env, capture_output=True)
        what = "Ray Data, %d node(s) of 1 CPU" % nodes
        if options:
            what += ", threads=1"
        print(f"{what:<34} {t:7.2f} s  "
              f"{len(files) / t:6.1f} files/s  {size / t:6.1f} MB/s")


def spark_rank(files, size, options=None):
    rank = load("spark_rank", ROOT / "examples" / "spark" / "rank.py")
    for executors in (1, 2):
        start = time.perf_counter()
        with rank.cluster(f"local-cluster[{executors},1,1024]") as spark:
            start = time.perf_counter() - start
            t = best(lambda: rank.rank(files, spark=spark, options=options))
        what = "Spark, %d executor(s) of 1 core" % executors
        if options:
            what += ", threads=1"
        print(f"{what:<34} {t:7.2f} s  "
              f"{len(files) / t:6.1f} files/s  {size / t:6.1f} MB/s  "
              f"(session start {start:.1f} s)")


if __name__ == "__main__":
    main()
