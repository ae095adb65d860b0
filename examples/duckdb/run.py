"""Run the named queries of queries.sql over a directory of tcpwhy Parquet outputs.

    python3 examples/duckdb/run.py DIR            # every query, as JSON: {name: [rows]}
    python3 examples/duckdb/run.py DIR top-causes # one of them

Each subdirectory of DIR is one `tcpwhy analyze --format parquet -o DIR/NAME CAPTURE`.
"""
import json
import pathlib
import sys

import duckdb


def queries():
    text = (pathlib.Path(__file__).parent / "queries.sql").read_text()
    named = {}
    for block in text.split("-- name: ")[1:]:
        name, _, sql = block.partition("\n")
        named[name.strip()] = sql.strip()
    return named


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    directory = sys.argv[1]
    wanted = sys.argv[2:]
    con = duckdb.connect()
    out = {}
    for name, sql in queries().items():
        if wanted and name not in wanted:
            continue
        cur = con.execute(sql.replace("{dir}", directory))
        cols = [d[0] for d in cur.description]
        out[name] = [dict(zip(cols, row)) for row in cur.fetchall()]
    json.dump(out, sys.stdout, indent=1, default=str)
    print()


if __name__ == "__main__":
    main()
