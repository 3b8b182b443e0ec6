"""How much of each CPU's time a process does not get on this machine with nothing else
running: a busy loop on every CPU at once, counting the gaps in which it did not run (the
host stopping the virtual CPU, and the guest kernel's own work).

On a virtual machine the host may stop a vCPU for milliseconds (another guest, its own
work).  Nothing in the guest shows it, and every latency tail measured here lands on it:
with a few stops over 1 ms each CPU-second, a record in flight for 0.3 ms at 1,000/s, and
the client's and the broker's processes on both CPUs, something like one record in a
hundred meets one, whatever the client does.  compare_latency.py runs this before and after its rounds and
prints the figures above its tables, so a p99 can be read against the floor the machine
gave that day.

    .venv/bin/python bench/host_noise.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

GAP = 50e-6  # a loop turn takes well under 1 µs: a longer pause is a stop from outside


def probe(seconds: float) -> dict:
    """Spin for ``seconds`` on this thread's CPU: the gaps over GAP, summed and counted."""
    perf = time.perf_counter
    last = start = perf()
    end = start + seconds
    lost = longest = 0.0
    over_1ms = gaps = 0
    while last < end:
        t = perf()
        d = t - last
        if d > GAP:
            gaps += 1
            lost += d
            longest = max(longest, d)
            over_1ms += d > 1e-3
        last = t
    return {"seconds": last - start, "gaps": gaps, "lost": lost, "longest": longest, "over_1ms": over_1ms}


def measure(seconds: float = 2.0) -> list[dict]:
    """probe() on every CPU this process may use, all at once (a child process pinned to
    each): one dict per CPU."""
    code = ("import json, os, sys; sys.path.insert(0, sys.argv[1]); import host_noise; "
            "os.sched_setaffinity(0, {int(sys.argv[2])}); "
            "print(json.dumps(host_noise.probe(float(sys.argv[3]))))")
    here = os.path.dirname(os.path.abspath(__file__))
    children = [subprocess.Popen([sys.executable, "-c", code, here, str(cpu), str(seconds)],
                                 stdout=subprocess.PIPE, text=True)
                for cpu in sorted(os.sched_getaffinity(0))]
    try:
        out = []
        for child in children:
            stdout, _ = child.communicate(timeout=seconds + 30)
            if child.returncode != 0:
                raise RuntimeError(f"host_noise probe exited with {child.returncode}")
            out.append(json.loads(stdout))
        return out
    finally:
        for child in children:  # a failed or late probe does not outlive the run
            if child.poll() is None:
                child.kill()
                child.wait()


def words(probes: list[dict]) -> str:
    """One phrase for a report: the share of time lost, gaps over 1 ms a second, the longest."""
    secs = sum(p["seconds"] for p in probes) or 1.0
    return (f"{sum(p['lost'] for p in probes) / secs:.1%} of each CPU's time lost in stops over "
            f"{GAP * 1e6:.0f} µs, {sum(p['over_1ms'] for p in probes) / secs:.1f} stops over 1 ms "
            f"a CPU-second, the longest {max(p['longest'] for p in probes) * 1e3:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    probes = measure(args.seconds)
    for cpu, p in zip(sorted(os.sched_getaffinity(0)), probes):
        print(f"CPU {cpu}: {p['gaps']} stops over {GAP * 1e6:.0f} µs in {p['seconds']:.1f} s, "
              f"{p['lost'] * 1e3:.1f} ms lost, {p['over_1ms']} over 1 ms, the longest {p['longest'] * 1e3:.2f} ms")
    print(words(probes))


if __name__ == "__main__":
    main()
