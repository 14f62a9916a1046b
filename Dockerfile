# syntax=docker/dockerfile:1
# gpubot image: the wheel and its locked dependencies in a venv, run as a non-root user.
#   docker build -t gpubot:dev .
# The base is pinned by digest; renew it with
#   docker buildx imagetools inspect python:3.11-slim-bookworm
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# Dependencies first (their layer survives code changes), exactly as locked, hashes checked.
# The lock holds the chart extra (matplotlib): the image is gpubot[chart], /gpu nodes draws.
COPY requirements.lock ./
RUN python -m venv /opt/gpubot \
 && /opt/gpubot/bin/pip install --require-hashes --no-deps -r requirements.lock
# Then gpubot itself, as a wheel: what ships is what `pip wheel` packs (templates and data).
COPY . .
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/gpubot/bin/pip install --no-deps /wheels/gpubot-*.whl

FROM ${PYTHON_IMAGE}
COPY --from=build /opt/gpubot /opt/gpubot
ENV PATH=/opt/gpubot/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# The numeric user of deploy/base (runAsUser 65532): no root, no login shell, no home.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["gpubot"]
CMD ["serve"]
