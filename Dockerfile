# graphserve as a drop-in for the tensorflow/serving image: the same environment variables,
# ports and command line. Build with `make image`; BASE_IMAGE may name any Debian bookworm image
# with Python 3.11 and its venv module (python3 -m venv).
ARG BASE_IMAGE=python:3.11-slim-bookworm
# The object-storage clients installed (model base paths on s3://, gs://), as tensorflow/serving
# reads them out of the box; EXTRAS= builds an image for local model directories only.
ARG EXTRAS=s3,gcs

# -- build: a virtual environment holding graphserve and its dependencies ---------------------
FROM ${BASE_IMAGE} AS build
ARG EXTRAS
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# A C compiler and Python's headers for the package's C extensions (runtime/kernels/_*.c), in
# this stage only; a Debian python3 without its headers gets them from python3-dev.
RUN apt-get update \
 && apt-get install --yes --no-install-recommends gcc libc6-dev \
 && if [ ! -f "$(python3 -c 'import sysconfig; print(sysconfig.get_path("include"))')/Python.h" ]; \
    then apt-get install --yes --no-install-recommends python3-dev; fi \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/graphserve
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protos ./protos
COPY runtime ./runtime
COPY serving ./serving
# The extensions are optional to pip (an install without a compiler goes on without them), not
# to the image: the import fails the build if they were not compiled.
RUN /opt/graphserve/bin/pip install ".${EXTRAS:+[$EXTRAS]}" \
 && cd / && /opt/graphserve/bin/python -c "import runtime.kernels._logistic, runtime.kernels._depthwise" \
 && /opt/graphserve/bin/python -m pip uninstall --yes pip setuptools
COPY deploy/image/entrypoint.sh /opt/graphserve/bin/graphserve_entrypoint.sh
COPY deploy/image/healthcheck.py /opt/graphserve/bin/graphserve_healthcheck.py
RUN chmod 0755 /opt/graphserve/bin/graphserve_entrypoint.sh

# -- runtime: the base image, the virtual environment and a non-root user ---------------------
FROM ${BASE_IMAGE}
RUN groupadd --gid 1000 graphserve \
 && useradd --uid 1000 --gid 1000 --create-home --shell /usr/sbin/nologin graphserve
COPY --from=build /opt/graphserve /opt/graphserve

# As tensorflow/serving: the model served is ${MODEL_BASE_PATH}/${MODEL_NAME}.
ENV MODEL_NAME=model \
    MODEL_BASE_PATH=/models \
    PATH=/opt/graphserve/bin:$PATH \
    PYTHONUNBUFFERED=1
RUN mkdir -p ${MODEL_BASE_PATH}

USER 1000:1000
WORKDIR /home/graphserve
# gRPC, REST.
EXPOSE 8500 8501

# Ready once every configured model has a version AVAILABLE (503 before, and while draining).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "/opt/graphserve/bin/graphserve_healthcheck.py"]

# The script execs graphserve, so graphserve is PID 1 and receives `docker stop`'s SIGTERM:
# it drains and exits 0. Arguments given to `docker run IMAGE ...` are appended to its flags.
ENTRYPOINT ["/opt/graphserve/bin/graphserve_entrypoint.sh"]
