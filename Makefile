# Two commands for a newcomer: `make plan` (the offline plan of the sample fleet) and `make test`.
# Both create .venv from the requirements files on first use (and again when those files change).

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The venv is current when its stamp holds the hash of the files it was installed from: their content decides, not
# their times (a checkout, a copy or an unpacked archive gives files any time, older or newer than the stamp's).
VENV_INPUTS := requirements-dev.lock pyproject.toml
VENV_HASH := $(firstword $(shell cat $(VENV_INPUTS) | sha256sum))
ifneq ($(shell cat $(STAMP) 2>/dev/null),$(VENV_HASH))
.PHONY: $(STAMP)
endif

.PHONY: plan test lint validate schema benchmark clean lock mutation screenshot receivers test-real

# The venv installs from the hash-locked file: every package and its dependencies at the pinned version with the
# pinned hashes, or nothing. Edit requirements*.txt or policy/requirements.in, then `make lock`.
$(STAMP):
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-dev.lock
	# the project itself, editable, for the `fleet` command (.venv/bin/fleet); the lock above has every dependency
	# and the setuptools it builds with, so nothing else is fetched
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation --editable .
	echo $(VENV_HASH) > $@

LOCK := $(PY) -m piptools compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
	--no-emit-find-links
lock: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check pip-tools==7.6.2
	$(LOCK) --output-file policy/requirements.txt policy/requirements.in
	$(LOCK) --output-file requirements-dev.lock requirements-dev.txt

plan: $(STAMP)
	$(PY) -m fleet plan

validate: $(STAMP)
	$(PY) -m fleet validate

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m fleet schema --check
	$(PY) -m pytest -q -n 2

# The real receivers (Pulumi CLI, Kubernetes provider, kube-apiserver, scheduler, controller manager, etcd, KWOK,
# Kueue, JobSet, Trainer), built with Go from the modules pinned under receivers/ into ~/.cache/gpu-fleet/receivers
# (GPU_FLEET_RECEIVERS_CACHE): docs/tests.md has the cold and warm build times.
receivers: $(STAMP)
	$(PY) -m tests.real.toolchain build

# The real tier: every stack of the shipped fleet, then of the lab's fleet, through the real CLI on hollow control
# planes, in a network namespace with only loopback (tests/real/isolation.py); needs Go, unshare and ip (util-linux,
# iproute2), openssl, and prometheus (Debian's) for the central that the queues' report reads.
test-real: receivers
	$(PY) -m tests.real.isolation $(PY) -m pytest -q -n 0 -p no:cacheprovider tests/real
	# the same checks on a team's own fleet (tests/fixtures/ownfleet), in a copy of the repository
	$(PY) -m tests.real.isolation $(PY) -m tests.own_fleet -q -n 0 tests/real/test_fleet_stacks.py

schema: $(STAMP)
	$(PY) -m fleet schema

# docs/report-first-screen.png: the e2e report test's loopback fleet on the shipped workloads' sample logs only, its
# report opened in headless Chromium, the first screen written to docs/ (a normal test run writes it to a temp folder).
# Needs mtail, prometheus, chromium and chromium-driver (missing ones fail rather than skip); about half a minute.
screenshot: $(STAMP)
	GPU_FLEET_UPDATE_SCREENSHOT=1 GPU_FLEET_REQUIRE_TOOLS=1 $(PY) -m pytest -q -n 0 tests/e2e/test_report.py \
		-k test_the_report_opens_in_a_real_browser_with_every_image_and_no_console_error

# Not CI: the plan's speed over its floor on a GKE fleet (about 20 minutes on 2 cores) and on a mixed fleet at 5, 10,
# 20 and 40 clusters with the shipped fleet (about 15 minutes), the real `pulumi preview` of every shipped stack cold
# and warm beside its offline plan (about 10 minutes, in the real tier's namespace on the built receivers), and the
# central Prometheus at 10, 50 and 200 leaves (about 25 minutes; needs prometheus and promtool), and the fleet's queues'
# dispatch rate on real Kueue across the manager and a worker (benchmarks/dispatch_rate.py, in the real tier's
# namespace; about 20 minutes). All niced: the machine is shared.
MIXED_CLOUDS := gcp,aws,azure,openstack,existing
benchmark: receivers
	nice -n 10 $(PY) -m benchmarks.plan_speed
	nice -n 10 $(PY) -m benchmarks.plan_speed --clouds $(MIXED_CLOUDS) --clusters 40 --sizes 5,10,20 --no-memory --shipped
	$(PY) -m tests.real.isolation nice -n 10 $(PY) -m benchmarks.preview_speed
	nice -n 10 $(PY) -m benchmarks.central_scale
	$(PY) -m tests.real.isolation nice -n 10 $(PY) -m benchmarks.dispatch_rate

# Mutation testing, before a release (not in CI: about 40 min on 2 shared cores, see docs/tests.md): mutmut plants
# small bugs, one at a time, in the modules [tool.mutmut] in pyproject.toml names (GPU sharing in the model and the
# pack) and runs the tests that reach each. MUTANTS narrows the run to some mutants by name, e.g. MUTANTS='fleet.model.sharing.resolve*'.
MUTANTS ?=
mutation: $(STAMP)
	rm -rf mutants
	nice -n 19 $(VENV)/bin/mutmut run --max-children 2 $(MUTANTS)
	$(VENV)/bin/mutmut results

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis mutants
