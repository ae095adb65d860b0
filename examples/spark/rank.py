"""Rank the causes of lost time over a directory of captures with Apache Spark.

    python3 examples/spark/rank.py 'captures/*.pcap'                        # JSON out
    python3 examples/spark/rank.py --master spark://HOST:7077 'captures/*.pcap'

Without --master it runs on `local-cluster[2,1,1024]`: a master and two workers inside the
driver's JVM, each worker starting its executor as a JVM of its own, all on 127.0.0.1.
A DataFrame of paths, dealt into a few partitions per core, goes through `mapInArrow`: each
task analyses its captures with the `tcpwhy` Python package (the same engine as the command
line, one capture at a time: tcpwhy needs no shuffle) and yields their findings as Arrow record
batches, with the capture in the `source` column. Spark SQL then ranks the causes over all of
them, the table of examples/ray/rank.py: captures, findings, connections, time lost, and the
servers that lost the most to it. On a cluster of several hosts every executor must see the
captures at the same path (a shared file system) and have tcpwhy installed.
"""
import contextlib
import glob
import json
import os
import shutil
import socket
import sys
import threading

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import SparkSession

MASTER = "local-cluster[2,1,1024]"

# What each task yields per finding: the columns the ranking needs (docs/parquet.md), with the
# capture in `source`. `connection` is uint64 in tcpwhy's tables; Spark has no unsigned types,
# and ids fit in int64.
FINDINGS = pa.schema([("source", pa.string()), ("connection", pa.int64()), ("id", pa.string()),
                      ("server", pa.string()), ("cost_ms", pa.float64())])
FINDINGS_DDL = "source string, connection long, id string, server string, cost_ms double"

# One row per cause, costliest first: the columns and order of examples/ray/rank.py. First per
# (cause, server), then per cause: one pass over the findings, two shuffles. A capture-wide
# finding has a null connection and a null server: it counts as a finding and in the time lost,
# not as a connection nor for a server (as the command line's summary counts it). A connection
# has one server, so the connections of a cause are the sum over its servers; captures are not
# (a capture can hold several servers) and go up as sets.
RANKING = """
WITH per_server AS (
  SELECT id, server,
         count(*) AS findings,
         size(collect_set(CASE WHEN connection IS NOT NULL THEN struct(source, connection) END))
           AS connections,
         collect_set(source) AS captures,
         sum(cost_ms) AS cost_ms
  FROM findings
  GROUP BY id, server
)
SELECT id,
       size(array_distinct(flatten(collect_list(captures)))) AS captures,
       sum(findings) AS findings,
       sum(connections) AS connections,
       round(sum(cost_ms), 3) AS cost_ms,
       transform(slice(array_sort(collect_list(CASE WHEN server IS NOT NULL
                                                    THEN struct(-cost_ms AS k, server, cost_ms)
                                               END)), 1, 3),
                 w -> named_struct('server', w.server, 'cost_ms', round(w.cost_ms, 3)))
         AS worst_servers
FROM per_server
GROUP BY id
ORDER BY cost_ms DESC, id
"""


class Union(AccumulatorParam):
    """An accumulator of sets: the executors that ran tasks."""

    def zero(self, value):
        return set()

    def addInPlace(self, a, b):
        return a | b


def executor():
    """The executor this Python worker serves, as `host:pid` of its JVM: the worker's nearest
    ancestor named `java` (Linux /proc; its parent's pid where there is no /proc)."""
    pid = os.getppid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8") as f:
                status = dict(line.split(":\t", 1) for line in f if ":\t" in line)
        except OSError:
            return f"{socket.gethostname()}:{os.getppid()}"
        if status["Name"].strip() == "java":
            return f"{socket.gethostname()}:{pid}"
        pid = int(status["PPid"])
    return f"{socket.gethostname()}:{os.getppid()}"


def analyze(batches, executors, options=None):
    """mapInArrow's function: each capture of `batches` (a `path` column) analysed in this
    task (`tcpwhy.analyze(path, **options)`), its findings yielded as record batches of
    FINDINGS; this executor added to `executors` (an accumulator)."""
    import tcpwhy  # imported on the executor

    executors.add({executor()})
    for batch in batches:
        for path in batch.column("path").to_pylist():
            findings = tcpwhy.analyze(path, **(options or {})).findings
            yield from findings.select(FINDINGS.names).cast(FINDINGS).to_batches()


@contextlib.contextmanager
def cluster(master=MASTER):
    """A SparkSession on `master`, on 127.0.0.1 only, stopped on exit. On `local-cluster[N,C,M]`
    it waits (up to 120 s) for all N executors to register before any job runs, so that every
    executor gets captures; at the end it removes the executors' work directories
    (SPARK_HOME/work/APP: their stdout and stderr), which local mode puts in the pyspark
    package."""
    # Every socket on the loopback address: the driver, the local master and workers, their
    # web UIs and the executors (who inherit the environment) bind to SPARK_LOCAL_IP.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = (SparkSession.builder.master(master).appName("tcpwhy-rank")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         # The executors' Python is the driver's (where tcpwhy is installed), unless
         # PYSPARK_PYTHON names another.
         .config("spark.pyspark.python", os.environ.get("PYSPARK_PYTHON", sys.executable)))
    if master.startswith("local-cluster["):
        workers, cores, _ = master[len("local-cluster["):-1].split(",")
        b = (b.config("spark.cores.max", str(int(workers) * int(cores)))
             .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
             .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "120s"))
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # The ranking shuffles a row per finding: a partition per core, not Spark's 200.
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    app = spark.sparkContext.applicationId
    try:
        yield spark
    finally:
        spark.stop()
        if master.startswith("local-cluster["):
            work = os.path.join(os.environ.get("SPARK_HOME") or _spark_home(), "work")
            shutil.rmtree(os.path.join(work, app), ignore_errors=True)
            with contextlib.suppress(OSError):
                os.rmdir(work)  # only if no other application's directory is left


def _spark_home():
    from pyspark.find_spark_home import _find_spark_home

    return _find_spark_home()


def rank(paths, master=MASTER, spark=None, timeout=None, tasks=None, options=None):
    """The ranked causes of `paths` (a list of capture files), computed on Spark: (a list of
    dicts, costliest first; the executors that analysed captures, as `host:pid`). It runs on
    `spark` (a SparkSession) if given, else on a session of its own on `master`, stopped
    after; in `tasks` tasks (default: 4 per core). With `timeout` (seconds) the job is
    cancelled when it runs out (an error). `options` go to `tcpwhy.analyze` (`threads=1`: one
    tracking thread per analysis, for executors of one core each)."""
    # Paths as the executors see them (their working directory is not ours).
    paths = [os.path.abspath(p) for p in paths]
    # `analyze` travels to the executors by value: they need not import this file.
    if __name__ != "__main__":
        from pyspark import cloudpickle

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if spark is None:
        with cluster(master) as spark:
            return rank(paths, spark=spark, timeout=timeout, tasks=tasks, options=options)
    sc = spark.sparkContext
    executors = sc.accumulator(set(), Union())

    def task(batches):
        return analyze(batches, executors, options)

    # The paths dealt round-robin into `tasks` partitions, so many per task: a Spark task costs
    # about 0.1 s here (55 small captures: 5.5 s as a task each, 1.5 s in 8 tasks), and 4 tasks
    # per core still let a free executor take the next when captures differ in size.
    tasks = min(len(paths), tasks or 4 * sc.defaultParallelism) or 1
    files = spark.createDataFrame(
        sc.parallelize(range(tasks), tasks).flatMap(lambda i: [(p,) for p in paths[i::tasks]]),
        "path string")
    files.mapInArrow(task, FINDINGS_DDL).createOrReplaceTempView("findings")
    timer = threading.Timer(timeout, sc.cancelAllJobs) if timeout else None
    if timer:
        timer.start()
    try:
        ranked = [r.asDict(recursive=True) for r in spark.sql(RANKING).collect()]
    finally:
        if timer:
            timer.cancel()
        spark.catalog.dropTempView("findings")
    return ranked, sorted(executors.value)


if __name__ == "__main__":
    args = sys.argv[1:]
    master = MASTER
    if args[:1] == ["--master"] and len(args) > 1:
        master, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__)
    files = sorted(p for pattern in args for p in glob.glob(pattern))
    ranked, executors = rank(files, master=master)
    json.dump({"causes": ranked, "executors": len(executors), "captures": len(files)},
              sys.stdout, indent=1)
    print()
