#!/usr/bin/env python3
"""Cardinality probe (docs/security.md, "Queue and label cardinality"):
a producer creates 40,000 queues in 40 batches; a
worker registers 100,000 queues and claims naming them. Prints sizes,
series, RSS and times. usage: probe.py BINARY [serve flags...]"""
import json, os, subprocess, sys, tempfile, time, urllib.request, urllib.error

binary, extra = sys.argv[1], sys.argv[2:]
port = 18000 + os.getpid() % 1000
base = f"http://127.0.0.1:{port}"
d = tempfile.mkdtemp()
proc = subprocess.Popen([binary, "serve", "--db", f"sqlite:{d}/b.db", "--listen", f"127.0.0.1:{port}",
                         "--producer-token", "P", "--worker-token", "W", "--admin-token", "A", *extra],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def call(method, path, tok, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Authorization": "Bearer " + tok})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read(), time.time() - t0
    except urllib.error.HTTPError as e:
        return e.code, e.read(), time.time() - t0

def rss():
    for l in open(f"/proc/{proc.pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) / 1024
try:
    for _ in range(100):
        try:
            if call("GET", "/healthz", "A")[0] == 200:
                break
        except Exception:
            time.sleep(0.1)
    call("GET", "/metrics", "A")
    print(f"RSS at start: {rss():.0f} MiB")
    codes = {}
    for b in range(40):
        st, _, _ = call("POST", "/v1/jobs/batch", "P", {"jobs": [{"kind": "k", "queue": f"q{b:02d}_{i:04d}"} for i in range(1000)]})
        codes[st] = codes.get(st, 0) + 1
    print(f"40 batches of 1000 new queues: statuses {codes}")
    time.sleep(6)  # metrics store gauges are up to 5 s old
    st, m, t = call("GET", "/metrics", "A")
    series = sum(1 for l in m.decode().splitlines() if l and not l.startswith("#"))
    print(f"/metrics: {len(m)/1e6:.2f} MB, {series} series, {t:.2f} s")
    st, q, t = call("GET", "/v1/queues", "P")
    print(f"GET /v1/queues: {st}, {len(q)/1e6:.3f} MB, {len(json.loads(q)['queues'])} queues, {t:.2f} s")
    print(f"RSS after: {rss():.0f} MiB")
    names = [f"w{i:06d}" for i in range(100_000)]
    st, b, t = call("PUT", "/v1/workers/probe", "W", {"queues": names})
    print(f"register with 100,000 queues: {st} in {t:.2f} s: {b[:160]!r}")
    if st != 200:
        call("PUT", "/v1/workers/probe", "W", {"queues": names[:1000]})
        st, b, t = call("POST", "/v1/workers/probe/claim", "W", {"queues": names})
        print(f"claim naming 100,000 queues: {st} in {t:.2f} s, answer {len(b)} bytes: {json.loads(b).get('detail','')[:200]!r}")
        st, b, t = call("POST", "/v1/workers/probe/claim", "W", {})
        print(f"claim of the 1000 registered queues: {st} in {t:.2f} s")
    else:
        st, b, t = call("POST", "/v1/workers/probe/claim", "W", {})
        print(f"claim of the 100,000 registered queues: {st} in {t:.2f} s")
    print(f"RSS at the end: {rss():.0f} MiB")
finally:
    proc.terminate()
    proc.wait()
