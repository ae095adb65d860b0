"""The Ray Data recipe on a real local cluster (a head and a worker node: separate raylet and
worker processes, started here on 127.0.0.1 and stopped at the end) ranks the causes of the
lab's 55 captures as the command line does file by file: per cause, the captures, findings,
connections and time lost summed from each capture's JSON summary, and the worst server from
its JSON findings. Run: `python3 -m pytest examples/ray` (needs `pip install "ray[data]"` and
the tcpwhy wheel; `.ci/run` installs both).
"""

import glob
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).parent))
ENV = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ray")
    head = ["ray", "start", "--head", "--node-ip-address=127.0.0.1", "--port=6379",
            "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats",
            f"--temp-dir={tmp}"]
    worker = ["ray", "start", "--address=127.0.0.1:6379", "--node-ip-address=127.0.0.1",
              "--num-cpus=1"]
    try:
        subprocess.run(head, check=True, env=ENV, capture_output=True, timeout=120)
        subprocess.run(worker, check=True, env=ENV, capture_output=True, timeout=120)
        yield "127.0.0.1:6379"
    finally:
        subprocess.run(["ray", "stop", "--force"], env=ENV, capture_output=True, timeout=120)


def cli():
    env = os.environ.get("TCPWHY_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "tcpwhy"
        if p.exists():
            return str(p)
    raise RuntimeError("no tcpwhy binary: cargo build, or set TCPWHY_BIN")


def test_ray_ranks_causes_as_the_command_line_does_file_by_file(cluster):
    import rank

    files = sorted(glob.glob(str(ROOT / "fixtures/lab/*.pcap*"))
                   + glob.glob(str(ROOT / "fixtures/lab/vantage/*.pcap*")))
    assert len(files) >= 36
    ranked, nodes = rank.rank(files, address=cluster)
    assert len(nodes) == 2, "both nodes analysed captures"
    want = {}
    worst = {}
    for f in files:
        out = subprocess.run([cli(), "analyze", "-q", "--format", "json", f],
                             capture_output=True, text=True)
        recs = [json.loads(line) for line in out.stdout.splitlines()]
        for c in recs[-1]["causes"]:
            w = want.setdefault(c["id"], [0, 0, 0, 0.0])
            w[0] += 1
            w[1] += c["findings"]
            w[2] += c["connections"]
            w[3] += c["cost_ms"]
        for x in recs:
            if x["type"] == "finding" and x["server"]:
                s = worst.setdefault(x["id"], {})
                s[x["server"]] = s.get(x["server"], 0.0) + x["cost_ms"]
    assert [c["id"] for c in ranked] == sorted(want, key=lambda i: (-round(want[i][3], 3), i))
    for c in ranked:
        captures, findings, connections, cost = want[c["id"]]
        assert (c["captures"], c["findings"], c["connections"]) == (captures, findings,
                                                                   connections), c["id"]
        assert abs(c["cost_ms"] - cost) < 0.001 * findings + 0.01, c["id"]
        if worst.get(c["id"]):
            top = max(worst[c["id"]].items(), key=lambda kv: (kv[1], kv[0]))[0]
            assert c["worst_servers"][0]["server"] == top, c["id"]
