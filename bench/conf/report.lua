-- Prints wrk's exact totals as one JSON line, for bench/harness.py. It defines only done(), so
-- wrk keeps its fast path (no Lua per request).
done = function(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        'BENCH-JSON {"requests":%d,"bytes":%d,"duration_us":%d,' ..
        '"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
        '"p50_us":%d,"p99_us":%d,"mean_us":%.1f}\n',
        summary.requests, summary.bytes, summary.duration,
        e.connect, e.read, e.write, e.status, e.timeout,
        latency:percentile(50), latency:percentile(99), latency.mean))
end
