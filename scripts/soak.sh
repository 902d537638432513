#!/usr/bin/env bash
# `make soak`: every multi-process, crash and race scenario (tests marked `process`, with the kill
# points marked `soak` that `make test` leaves out, at full size) run SOAK times (default 3) in each
# tier that runs it (the local suite, then the cluster, Spark Connect and
# object-store tiers), and a pass count per scenario. Not part of `make test`.
# Usage: SOAK=N scripts/soak.sh [local|cluster|connect|s3|all] [pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
rounds="${SOAK:-3}"
tiers="${1:-all}"
[ $# -gt 0 ] && shift
[ "$tiers" = all ] && tiers="local connect s3"  # the cluster tier runs no process scenario
export SPARK_LOCAL_IP=127.0.0.1
export PRAVEGA_SPARK_TEST_FULL_SIZE=1  # the scenarios' full sizes (tests/processes.py: sized)
out="$(mktemp -d)"
for round in $(seq 1 "$rounds"); do
  for tier in $tiers; do
    echo "[soak] round $round/$rounds, $tier tier"
    report="$out/$tier-$round.xml"
    case "$tier" in
      local) "$PY" -m pytest -m "process and not cluster and not s3" -p no:cacheprovider --junitxml="$report" "$@" ;;
      *) bash scripts/test_tiers.sh "$tier" -m "process and $tier" --junitxml="$report" "$@" ;;
    esac
  done
done
"$PY" - "$out" <<'PY'
import glob, os, sys
import xml.etree.ElementTree as ET
from collections import defaultdict

runs, passed, first_failure = defaultdict(int), defaultdict(int), {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.xml"))):
    tier = os.path.basename(path).rsplit("-", 1)[0]
    for case in ET.parse(path).iter("testcase"):
        key = f"{tier:8} {case.get('classname')}::{case.get('name')}"
        if case.find("skipped") is not None:
            continue
        runs[key] += 1
        failed = case.find("failure") if case.find("failure") is not None else case.find("error")
        if failed is None:
            passed[key] += 1
        else:
            first_failure.setdefault(key, (failed.get("message") or "").splitlines()[0][:200] if failed.get("message") else "")
print(f"\n[soak] pass counts ({len(runs)} scenarios)")
for key in sorted(runs):
    mark = "" if passed[key] == runs[key] else f"   FAILED: {first_failure.get(key, '')}"
    print(f"  {passed[key]}/{runs[key]}  {key}{mark}")
bad = [k for k in runs if passed[k] != runs[k]]
print(f"[soak] {len(runs) - len(bad)} of {len(runs)} scenarios passed every round")
sys.exit(1 if bad or not runs else 0)
PY
