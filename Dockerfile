# The image deploy/serve runs: docker build -t ghcr.io/example/opsctl:0.1.0 .
# (the tag is the version in pyproject.toml; deploy/serve/deployment.yaml names the same image).
#
# Two stages: the first builds opsctl's wheel and installs it with its dependencies into a
# virtualenv; the second copies only that virtualenv (no compiler, no sources, no pip cache) and
# runs as an unprivileged user. The base is pinned to an exact patch release: rebuild on purpose.
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY opsctl ./opsctl
# opsctl/defaults links to these (the embedded default config, SLOs and scenarios the wheel ships).
COPY opsctl.yaml ./
COPY slos ./slos
COPY chaos ./chaos
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/opsctl/venv \
 && /opt/opsctl/venv/bin/pip install /dist/opsctl-*.whl

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="opsctl" \
      org.opencontainers.image.description="SRE toolkit for the LLM inference service; opsctl serve acts on alerts"
COPY --from=build /opt/opsctl/venv /opt/opsctl/venv
COPY slos /opt/opsctl/slos
ENV PATH=/opt/opsctl/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# 65532: the "nonroot" uid the Deployment's securityContext runs as; nothing in the image is writable by it.
USER 65532:65532
WORKDIR /var/lib/opsctl
EXPOSE 9095
ENTRYPOINT ["opsctl"]
CMD ["--help"]
