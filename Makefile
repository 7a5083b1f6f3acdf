# graphserve developer entry points. Each target creates the virtual environment it needs.
PYTHON ?= python3
VENV := .venv
TF_VENV := .venv-tf
TRITON_VENV := .venv-triton
PY := $(VENV)/bin/python
TF_PY := $(TF_VENV)/bin/python

.PHONY: serve test protos fixtures legacy-fixtures kernel-fixtures bench bench-legacy bench-serving lint

# The editable install also compiles the package's C extensions (runtime/kernels/_*.c).
$(VENV)/.installed: pyproject.toml $(wildcard runtime/kernels/_*.c)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

# TensorFlow lives only in its own environment, used by fixture and benchmark tooling.
$(TF_VENV)/.installed: fixtures/requirements.txt
	$(PYTHON) -m venv $(TF_VENV)
	$(TF_VENV)/bin/pip install --quiet -r fixtures/requirements.txt
	# The official API package, for wire-compatibility tests; its own dependency on the full
	# tensorflow wheel would duplicate tensorflow-cpu.
	$(TF_VENV)/bin/pip install --quiet --no-deps tensorflow-serving-api==2.21.0
	touch $@

# Triton's client (tritonclient), for the v2 protocol tests; its protobuf pin needs its own
# environment.
$(TRITON_VENV)/.installed: tests/serving/v2/requirements-triton.txt
	$(PYTHON) -m venv $(TRITON_VENV)
	$(TRITON_VENV)/bin/pip install --quiet -r tests/serving/v2/requirements-triton.txt
	touch $@

serve: $(VENV)/.installed
	$(VENV)/bin/graphserve --port=8500 --rest_api_port=8501 --model_config_file=config/models.config

# Lint and type checks first (as `make lint`); the suite compares against TensorFlow in its own
# environment, so it builds both.
test: lint $(TF_VENV)/.installed $(TRITON_VENV)/.installed
	$(PY) -m pytest

protos: $(VENV)/.installed
	$(PY) protos/generate.py

fixtures: $(TF_VENV)/.installed
	$(TF_PY) fixtures/make_fixtures.py
	$(TF_PY) fixtures/record_tensor_protos.py
	$(TF_PY) fixtures/record_checkpoints.py
	$(TF_PY) fixtures/make_warmup.py

# Older TensorFlow releases, one environment each, write and record the tf2XX_* fixtures.
LEGACY_TF := 2.12 2.13 2.14 2.15

.venv-tf%/.installed: fixtures/legacy/requirements-tf%.txt
	$(PYTHON) -m venv .venv-tf$*
	.venv-tf$*/bin/pip install --quiet -r $<
	touch $@

legacy-fixtures: $(foreach v,$(LEGACY_TF),.venv-tf$(v)/.installed)
	$(foreach v,$(LEGACY_TF),.venv-tf$(v)/bin/python fixtures/make_legacy_fixtures.py &&) true

kernel-fixtures: $(TF_VENV)/.installed
	$(TF_PY) fixtures/record_kernel_cases.py
	$(TF_PY) fixtures/record_graph_cases.py

bench: $(VENV)/.installed $(TF_VENV)/.installed
	$(PY) bench/runtime_bench.py

# The older releases' fixtures against the release that wrote them: load time and per-call latency.
LEGACY_BENCH := $(PY) bench/runtime_bench.py --engines ours,tf1,tf2 --batch-sizes 1,32
LEGACY_MODELS = $(foreach m,keras2_mlp keras2_cnn keras2_lstm module builder,tf$(subst .,,$(1))_$(m))
ESTIMATORS := $(foreach m,linear_classifier linear_regressor dnn_classifier wide_deep_raw partitioned_wide_deep,tf215_$(m))

bench-legacy: $(VENV)/.installed $(foreach v,$(LEGACY_TF),.venv-tf$(v)/.installed)
	$(foreach v,$(LEGACY_TF),$(LEGACY_BENCH) --tf-python .venv-tf$(v)/bin/python --models $(call LEGACY_MODELS,$(v)) $(if $(filter 2.15,$(v)),tf215_tf1_dynamic_rnn tf215_tf1_map_fn) &&) true
	$(LEGACY_BENCH) --tf-python .venv-tf2.15/bin/python --signature predict --models $(ESTIMATORS)

# Throughput and latency of the daemon under load (wrk, h2load) with and without batching,
# beside the ceiling servers and FastAPI + TensorFlow; draws docs/latency_vs_load.png.
bench-serving: $(VENV)/.installed $(TF_VENV)/.installed
	$(VENV)/bin/pip install --quiet -e '.[bench]'
	command -v wrk >/dev/null && command -v h2load >/dev/null || apt-get install -y wrk nghttp2-client
	$(PY) bench/serving_bench.py

# ruff over the whole tree; mypy --strict over runtime/ and serving/ (both configured in
# pyproject.toml).
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The container image (Dockerfile): tensorflow/serving's environment, ports and command line.
# BASE_IMAGE: any Debian bookworm image with Python 3.11 (deploy/image/offline_base.sh makes one
# without a registry); DOCKER_BUILD_FLAGS, e.g. --network=host where the build's pip needs it.
IMAGE ?= graphserve:latest
BASE_IMAGE ?= python:3.11-slim-bookworm
EXTRAS ?= s3,gcs
DOCKER ?= docker
DOCKER_BUILD_FLAGS ?=

.PHONY: image test-image

image:
	$(DOCKER) build $(DOCKER_BUILD_FLAGS) --build-arg BASE_IMAGE=$(BASE_IMAGE) \
		--build-arg EXTRAS=$(EXTRAS) -t $(IMAGE) .

# Builds the image, then serves saved_models/half_plus_two from it: REST and gRPC predicts,
# HEALTHCHECK, uid 1000, exit status 0 after `docker stop` (deploy/image/test_image.sh).
test-image: image $(VENV)/.installed
	DOCKER=$(DOCKER) PYTHON=$(PY) deploy/image/test_image.sh $(IMAGE)
