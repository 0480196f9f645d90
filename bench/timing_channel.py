"""The timing channel that remains between two jobs in one worker, measured.

    python bench/timing_channel.py [--slots 4] [--slot-ms 25] [--pairs 60]

Job A (the sender) returns at a chosen phase of the wall clock: one of ``--slots`` slots of
``--slot-ms`` each. Job B (the receiver), the next job in the same worker, reads the clock
when its submission is loaded and decodes the slot. After a calibration (the sender sends
slot 0, 15 times), ``--pairs`` random symbols are sent; the report is the share decoded and
the bits per job of a symmetric channel with that error rate. Nothing here is a test: the
figure depends on the machine's load (see sandbox/README.md, "What it does not stop").
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sandbox import SandboxConfig, SandboxPool  # noqa: E402

TEST = "def check(candidate):\n    candidate(1)\n"
SENDER = ("import time\ndef f(x):\n    P, Q, s = {period!r}, {slot!r}, {symbol}\n"
          "    time.sleep((s * Q - time.time() % P) % P)\n    return x\n")
RECEIVER = "import time\nLOADED = time.time()\ndef f(x):\n    return LOADED\n"


def bits_per_job(slots: int, error: float) -> float:
    if error <= 0:
        return math.log2(slots)
    if error >= 1:
        return 0.0
    h = -(error * math.log2(error) + (1 - error) * math.log2(1 - error))
    return max(0.0, math.log2(slots) - h - error * math.log2(slots - 1))


def measure(slots: int, slot_s: float, pairs: int, seed: int = 7) -> dict:
    period = slots * slot_s
    rng = random.Random(seed)
    with SandboxPool(workers=1, config=SandboxConfig()) as pool:
        def send_and_read(symbol: int) -> float:
            pool.check(SENDER.format(period=period, slot=slot_s, symbol=symbol), TEST, "f")
            return pool.check(RECEIVER, TEST, "f", record_calls=True).decoded_calls()[0]["value"] % period

        pool.check("def f(x):\n    return x\n", TEST, "f")
        offsets = sorted(send_and_read(0) for _ in range(15))
        delay = offsets[len(offsets) // 2]
        decoded = 0
        for _ in range(pairs):
            s = rng.randrange(slots)
            decoded += round(((send_and_read(s) - delay) % period) / slot_s) % slots == s
    share = decoded / pairs
    return {"slots": slots, "slot_ms": slot_s * 1e3, "pairs": pairs, "decoded": share,
            "bits_per_job": round(bits_per_job(slots, 1 - share), 3),
            "calibration_spread_ms": round((offsets[-2] - offsets[1]) * 1e3, 2),
            "load_average": os.getloadavg()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--slot-ms", type=float, default=25.0)
    ap.add_argument("--pairs", type=int, default=60)
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.slots, a.slot_ms / 1e3, a.pairs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
