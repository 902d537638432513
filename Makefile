# The two commands of the README. Both run the idempotent set-up first (scripts/setup.sh; each
# step prints what it fetched or that it was present):
#   demo   .venv with the extras the demo runs on (spark,quality), Delta's jars: nothing for S3 or Connect
#   setup  (every other target) the same with every extra (spark,quality,plots,test)
# The object-store tier fetches its own artefacts (`scripts/setup.sh s3`: Hadoop's S3A connector,
# the AWS SDK bundle, S3Proxy) when it starts; the Connect tier needs nothing more.
PY := .venv/bin/python

.PHONY: setup demo pictures test test-fast test-unit test-cluster test-s3 test-connect lint bench bench-reads soak soak-long

setup:
	@bash scripts/setup.sh dev

demo:
	@bash scripts/setup.sh demo
	$(PY) jobs/demo_pipeline.py $(ARGS)

# the README's pictures, drawn from the demo's store (run `make demo` first)
pictures: setup
	.venv/bin/pravega-spark --root store/demo plot demo/telemetry --out docs/images

# the local suite (tests marked `cluster` or `s3` run in those tiers instead; the local multi-process
# scenarios, marked `process`, and the kill points marked `soak` run in `make soak`), then the
# cluster, Spark Connect and object-store tiers, each in its own pytest invocation
# (scripts/test_tiers.sh; the tiers keep their own process scenarios; the S3 tier fetches its artefacts),
# the tiers beside the local suite (scripts/test_all.sh; TEST_AT_ONCE=0: one after the other)
test: setup
	bash scripts/test_all.sh $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-cluster: setup
	bash scripts/test_tiers.sh cluster $(PYTEST_ARGS)

test-s3: setup
	bash scripts/test_tiers.sh s3 $(PYTEST_ARGS)

test-connect: setup
	bash scripts/test_tiers.sh connect $(PYTEST_ARGS)

# every multi-process, crash and race scenario SOAK times (default 3) in each tier, with a pass count
# per scenario (not part of `make test`); SOAK_TIERS picks tiers (local cluster connect s3)
soak: setup
	SOAK=$(or $(SOAK),3) bash scripts/soak.sh "$(or $(SOAK_TIERS),all)" $(PYTEST_ARGS)

# the feature scenarios ROUNDS times (default 3) on one long-lived classic session, then on one
# 1 GiB Spark Connect server, with the live heap after each round and a verdict (not in `make test`)
soak-long: setup
	ROUNDS=$(or $(ROUNDS),3) bash scripts/soak_long.sh "$(or $(SOAK_LONG),all)" $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check pravega_spark jobs tests bench

bench: setup
	$(PY) bench/append_read.py

# issue #50's table: every read against a plain Delta read of the same rows, classic then over Connect
bench-reads: setup
	$(PY) bench/reads.py
	$(PY) bench/reads.py --connect
