"""Rank the causes of lost time over a directory of captures with Ray Data.

    ray start --head --node-ip-address=127.0.0.1 --port=6379 --num-cpus=1 --include-dashboard=false
    ray start --address=127.0.0.1:6379 --node-ip-address=127.0.0.1 --num-cpus=1   # a worker
    python3 examples/ray/rank.py 'captures/*.pcap'                                 # JSON out

Each capture is analysed where Ray schedules it, by the `tcpwhy` Python package (the same
engine as the command line, one capture per task: tcpwhy needs no shuffle); the per-capture
cause totals come back as Arrow tables and are summed here. The result, one row per cause:
captures, findings, connections, time lost, and the servers that lost the most to it.
"""
import glob
import json
import os
import sys

import pyarrow as pa
import ray


def analyze(batch: pa.Table, options=None) -> pa.Table:
    """One row per (capture, cause), and one per (capture, cause, server) for the worst hosts;
    each capture analysed by `tcpwhy.analyze(path, **options)`."""
    import tcpwhy  # imported on the worker

    rows = []
    node = ray.get_runtime_context().get_node_id()
    for path in batch.column("path").to_pylist():
        r = tcpwhy.analyze(path, **(options or {}))
        for c in r.causes.to_pylist():
            rows.append({"capture": path, "node": node, "id": c["id"], "server": "",
                         "findings": c["findings"], "connections": c["connections"],
                         "cost_ms": c["cost_ms"]})
        f = r.findings.select(["id", "server", "cost_ms"]).to_pylist()
        per_server = {}
        for x in f:
            if x["server"] is not None:
                k = (x["id"], x["server"])
                per_server[k] = per_server.get(k, 0.0) + x["cost_ms"]
        for (cause, server), cost in per_server.items():
            rows.append({"capture": path, "node": node, "id": cause, "server": server, "findings": 0,
                         "connections": 0, "cost_ms": cost})
    schema = pa.schema([("capture", pa.string()), ("node", pa.string()), ("id", pa.string()),
                        ("server", pa.string()),
                        ("findings", pa.int64()), ("connections", pa.int64()),
                        ("cost_ms", pa.float64())])
    return pa.Table.from_pylist(rows, schema=schema)


def rank(paths, address="127.0.0.1:6379", options=None):
    """The ranked causes of `paths` (a list of capture files), computed on the Ray cluster at
    `address`: (a list of dicts, costliest first; the Ray nodes that analysed captures).
    `options` go to `tcpwhy.analyze` (`threads=1`: one tracking thread per analysis, for
    nodes of one CPU each)."""
    # Paths as the workers see them (their working directory is not ours); the driver on the
    # loopback address the cluster was started on.
    paths = [os.path.abspath(p) for p in paths]
    # `analyze` travels to the workers by value: they need not import this file.
    if __name__ != "__main__":
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address=address, _node_ip_address="127.0.0.1", logging_level="ERROR",
             log_to_driver=False)
    try:
        ds = ray.data.from_items([{"path": p} for p in paths])
        rows = ds.map_batches(analyze, batch_size=1, batch_format="pyarrow",
                              fn_kwargs={"options": options}).take_all()
    finally:
        ray.shutdown()
    causes = {}
    servers = {}
    for r in rows:
        if r["server"]:
            s = servers.setdefault(r["id"], {})
            s[r["server"]] = s.get(r["server"], 0.0) + r["cost_ms"]
            continue
        c = causes.setdefault(r["id"], {"id": r["id"], "captures": 0, "findings": 0,
                                        "connections": 0, "cost_ms": 0.0})
        c["captures"] += 1
        c["findings"] += r["findings"]
        c["connections"] += r["connections"]
        c["cost_ms"] += r["cost_ms"]
    for c in causes.values():
        c["cost_ms"] = round(c["cost_ms"], 3)
        worst = sorted(servers.get(c["id"], {}).items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        c["worst_servers"] = [{"server": s, "cost_ms": round(v, 3)} for s, v in worst]
    nodes = sorted({r["node"] for r in rows})
    return sorted(causes.values(), key=lambda c: (-c["cost_ms"], c["id"])), nodes


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    files = sorted(p for pattern in sys.argv[1:] for p in glob.glob(pattern))
    ranked, nodes = rank(files)
    json.dump({"causes": ranked, "nodes": len(nodes), "captures": len(files)}, sys.stdout,
              indent=1)
    print()
