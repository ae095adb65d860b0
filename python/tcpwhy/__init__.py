"""tcpwhy: why was this TCP connection slow?

Captures in, causes out, as pyarrow Tables: the same engine as `tcpwhy analyze` (the
command line), run in this process.

    >>> import tcpwhy
    >>> r = tcpwhy.analyze("capture.pcap")            # or a list of paths (one capture)
    >>> r.findings.to_pandas()[["id", "cost_ms", "explanation"]]
    >>> r.causes                                       # time lost per finding id
    >>> print(tcpwhy.explain("syn-stale-state"))

Tables and columns are those of `tcpwhy analyze --format parquet` (docs/parquet.md):
connections, findings, exchanges, stalls, causes; `summary` is the JSON summary as a dict.
"""

import json
import os
import tempfile
from dataclasses import dataclass

import pyarrow as pa

from . import _tcpwhy

__all__ = ["analyze", "explain", "Result", "CaptureError", "__version__"]
__version__ = _tcpwhy.VERSION

TABLES = ("connections", "findings", "exchanges", "stalls", "causes")


@dataclass
class Result:
    """What a run found: one pyarrow Table per record type, and the summary."""

    connections: pa.Table
    findings: pa.Table
    exchanges: pa.Table
    stalls: pa.Table
    causes: pa.Table
    summary: dict


class CaptureError(ValueError):
    """A capture stopped being readable partway (corrupt from some offset on): the message is
    the command line's; `result` holds what was analysed before it."""

    def __init__(self, message, result):
        super().__init__(message)
        self.result = result


def analyze(paths, *, filter=None, disable=(), idle_timeout=300.0,
            max_connections=1_000_000, threads=None):
    """Analyse one capture, or several read as one (merged by timestamp).

    paths: a path or a list of paths (pcap or pcapng, optionally gzip or zstd).
    filter: a capture filter in tcpdump's syntax ("host 10.0.0.5 and port 443").
    disable: finding ids to turn off. idle_timeout (seconds), max_connections, threads: as
    the command line's options of the same names.

    Raises ValueError (a bad filter, a file that is not a capture), OSError (a file that
    cannot be opened), CaptureError (reading stopped partway; the results so far attached).
    """
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    paths = [os.fsdecode(p) for p in paths]
    with tempfile.TemporaryDirectory(prefix="tcpwhy-") as out:
        # Arrow IPC files: the tables the command line writes as Parquet, read back without
        # decoding (read into memory: the directory is removed on return).
        _tcpwhy.analyze_to_arrow(paths, out, filter, list(disable), float(idle_timeout),
                                 int(max_connections), threads)
        tables = {}
        for t in TABLES:
            with pa.OSFile(os.path.join(out, t + ".arrow")) as f:
                tables[t] = pa.ipc.open_file(f).read_all()
        with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
    result = Result(summary=summary, **tables)
    if summary.get("error"):
        raise CaptureError(summary["error"], result)
    return result


def explain(id=None):
    """`tcpwhy explain [ID]`: every finding id and its title, or one id's documentation."""
    return _tcpwhy.explain(id)
