#!/usr/bin/env python3
"""The durability floor of docs/PERFORMANCE.md: single-row commits one after the other in WAL mode with Python's
sqlite3, synchronous FULL and NORMAL, on the disk the benchmarks use (the system temporary directory). Prints the
p50 and p90 per commit in ms as JSON (2,000 commits each, the first 200 not counted)."""
import json, os, sqlite3, tempfile, time

out = {}
for sync in ('FULL', 'NORMAL'):
    with tempfile.TemporaryDirectory() as d:
        db = sqlite3.connect(os.path.join(d, 'floor.sqlite'), isolation_level=None)
        db.execute('PRAGMA journal_mode=WAL')
        db.execute(f'PRAGMA synchronous={sync}')
        db.execute('CREATE TABLE m (id INTEGER PRIMARY KEY, body TEXT)')
        times = []
        for k in range(2000):
            t = time.perf_counter()
            db.execute('BEGIN')
            db.execute('INSERT INTO m (body) VALUES (?)', ('ping %d' % k,))
            db.execute('COMMIT')
            times.append((time.perf_counter() - t) * 1000)
        db.close()
    times = sorted(times[200:])
    out[sync] = {'p50': round(times[len(times) // 2], 3), 'p90': round(times[int(len(times) * 0.9)], 3)}
print(json.dumps(out))
