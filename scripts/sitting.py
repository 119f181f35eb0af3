#!/usr/bin/env python3
"""Before/after in one sitting (docs/PERFORMANCE.md): two release binaries of hookbot run alternately (A B B A per two
passes) through `hookbot bench`'s workloads and the outside harness, one JSON line per run appended to OUT.

    scripts/sitting.py BEFORE AFTER [passes=2] [out=sitting.jsonl]

SKIP (comma-separated) leaves out the runs named, or with one of these words in their name: e.g. SKIP=w4,outside or
SKIP=quick.
Each line: {"binary", "pass", "what", "load": [before, after], "seconds", "at", "result": the run's JSON}."""
import json, os, subprocess, sys, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
before, after = sys.argv[1], sys.argv[2]
passes = int(sys.argv[3]) if len(sys.argv) > 3 else 2
out = sys.argv[4] if len(sys.argv) > 4 else 'sitting.jsonl'
skip = set(filter(None, os.environ.get('SKIP', '').split(',')))
outside = os.path.join(root, 'scripts', 'outside-bench.js')
runs = [
    ('bench w1a,w1b,w3', ['bench', '--only', 'w1a,w1b,w3']),
    ('bench w1a relaxed', ['bench', '--only', 'w1a', '--relaxed-sync']),
    ('bench w2 quick', ['bench', '--only', 'w2', '--quick']),
    ('bench w2 full', ['bench', '--only', 'w2']),
    ('bench hooks', ['bench', '--only', 'hooks']),
    ('bench w4', ['bench', '--only', 'w4']),
    ('outside full', ['--only', 'w1a,w1b,w3']),
    ('outside normal', ['--relaxed-sync', '--only', 'w1a,w1b']),
]


def load():
    with open('/proc/loadavg') as f:
        return f.read().split()[0]


with open(out, 'a') as f:
    for p in range(passes):
        for binary in ([before, after] if p % 2 == 0 else [after, before]):
            for what, args in runs:
                if what in skip or set(what.replace(',', ' ').split()) & skip:
                    continue
                if what.startswith('outside'):
                    argv = ['node', outside, '--binary', os.path.abspath(binary)] + args
                else:
                    argv = [os.path.abspath(binary)] + args
                at, l0, t0 = time.strftime('%H:%M:%S'), load(), time.time()
                r = subprocess.run(argv, capture_output=True, text=True, cwd=root)
                try:
                    result = json.JSONDecoder().raw_decode(r.stdout[r.stdout.index('{'):])[0]
                except ValueError:
                    result = {'error': r.stderr[-2000:], 'stdout': r.stdout[-2000:]}
                line = {'binary': binary, 'pass': p, 'what': what, 'load': [l0, load()],
                        'seconds': round(time.time() - t0), 'at': at, 'result': result}
                f.write(json.dumps(line) + '\n')
                f.flush()
                print(what, binary, line['load'], line['seconds'], 's', flush=True)
