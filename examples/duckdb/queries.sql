-- The questions a fleet asks of tcpwhy's Parquet tables, for DuckDB. `{dir}` is a directory
-- holding one `tcpwhy analyze --format parquet -o {dir}/NAME CAPTURE` output per capture;
-- `run.py DIR` runs each query and prints its rows as JSON. Each query starts with its name.

-- name: top-causes
-- The causes ranked by time lost over every capture (the text report's ranking, fleet-wide).
SELECT id,
       count(*) AS findings,
       count(DISTINCT CASE WHEN connection IS NOT NULL THEN source || '#' || connection END) AS connections,
       round(sum(cost_ms), 3) AS cost_ms
FROM read_parquet('{dir}/*/findings.parquet')
GROUP BY id
ORDER BY cost_ms DESC, id;

-- name: worst-servers
-- The services that lost the most time, and to what.
SELECT server_ip, server_port,
       count(*) AS findings,
       round(sum(cost_ms), 3) AS cost_ms,
       string_agg(DISTINCT id, ',' ORDER BY id) AS causes
FROM read_parquet('{dir}/*/findings.parquet')
WHERE connection IS NOT NULL
GROUP BY server_ip, server_port
ORDER BY cost_ms DESC, server_ip, server_port
LIMIT 10;

-- name: cost-over-time
-- Time lost per minute and cause (by when each finding began).
SELECT strftime(time_bucket(INTERVAL 1 minute, "start"), '%Y-%m-%dT%H:%M:00Z') AS minute,
       id,
       count(*) AS findings,
       round(sum(cost_ms), 3) AS cost_ms
FROM read_parquet('{dir}/*/findings.parquet')
GROUP BY ALL
ORDER BY minute, id;

-- name: slowest-services
-- Connection durations per service: the median and the 99th percentile.
SELECT server_ip, server_port,
       count(*) AS connections,
       round(quantile_cont(duration_ms, 0.5), 3) AS p50_ms,
       round(quantile_cont(duration_ms, 0.99), 3) AS p99_ms
FROM read_parquet('{dir}/*/connections.parquet')
GROUP BY server_ip, server_port
ORDER BY p99_ms DESC, server_ip, server_port
LIMIT 10;
