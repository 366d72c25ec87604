# syntax=docker/dockerfile:1
# The Strom image: `strom` (broker, CLI, `strom dev`) and `strom-operator`, on a distroless
# base with no shell and no package manager, run as a numeric non-root user.
#
#   docker build -t strom:dev .
#   docker build --build-arg RUST_IMAGE=registry.example/rust:1.95-bookworm \
#                --build-arg RUNTIME_IMAGE=registry.example/distroless/cc-debian12:nonroot -t strom:dev .
#
# The build stage runs scripts/release-build.sh, the release build CI runs too (test.sh).
# docs/packaging.md: loading the image into kind or k3d, and what the runtime stage holds.

# Base images are build arguments so that air-gapped users can point them at their own
# registry. The runtime base must provide glibc (the binaries link it dynamically).
ARG RUST_IMAGE=docker.io/library/rust:1.95-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS build
WORKDIR /src
COPY . .
RUN bash scripts/release-build.sh /out

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="strom" \
      org.opencontainers.image.description="Strom: a Kafka-compatible event-streaming broker and its Kubernetes operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/strom-dev/strom"
COPY --from=build --chown=0:0 --chmod=0555 /out/strom /out/strom-operator /usr/local/bin/
# The data directory: a volume (the operator mounts each broker's claim here).
VOLUME ["/var/lib/strom"]
# 9092 Kafka clients, 9093 internal (replication, raft, admin gRPC), 9094 HTTP (metrics,
# health); 8080 the operator's metrics and health.
EXPOSE 9092 9093 9094 8080
# Nothing is written outside the volume and /tmp, so a read-only root filesystem works.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/strom"]
CMD ["serve", "--data-dir=/var/lib/strom/data"]
