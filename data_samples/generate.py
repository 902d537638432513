"""Deterministically generate data_samples/telemetry.jsonl: keyed device telemetry.

Run: python data_samples/generate.py  (same output every time: fixed seed, fixed clock)

Each line is one reading: device_id (the routing key), seq (per-device sequence number, so the
demo can check per-key order), ts, site, firmware, temperature_c, humidity_pct, battery_pct,
status. A few "hot" devices send far more readings, which loads one segment more than the others.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

EVENTS = 24_000
DEVICES = 400
HOT_DEVICES = 6          # these send ~35% of all readings
SITES = ["ams-1", "ams-2", "fra-1", "lis-1", "osl-1", "waw-1"]
FIRMWARE = ["3.2.1", "3.2.4", "3.3.0"]


def generate(path: Path, events: int = EVENTS, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    devices = [f"dev-{i:04d}" for i in range(DEVICES)]
    hot = devices[:HOT_DEVICES]
    profile = {d: (rng.choice(SITES), rng.choice(FIRMWARE), rng.uniform(15, 30), rng.uniform(30, 70))
               for d in devices}
    seq = dict.fromkeys(devices, 0)
    battery = {d: rng.uniform(60, 100) for d in devices}
    with path.open("w") as out:
        for i in range(events):
            device = rng.choice(hot) if rng.random() < 0.35 else rng.choice(devices)
            site, firmware, base_t, base_h = profile[device]
            battery[device] = max(1.0, battery[device] - rng.uniform(0, 0.05))
            temp = base_t + rng.gauss(0, 1.5)
            record = {
                "device_id": device,
                "seq": seq[device],
                "ts": (start + timedelta(milliseconds=250 * i)).isoformat(),
                "site": site,
                "firmware": firmware,
                "temperature_c": round(temp, 2),
                "humidity_pct": round(base_h + rng.gauss(0, 3), 2),
                "battery_pct": round(battery[device], 1),
                "status": "ALERT" if temp > base_t + 4 else "OK",
            }
            seq[device] += 1
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    generate(Path(__file__).with_name("telemetry.jsonl"))
