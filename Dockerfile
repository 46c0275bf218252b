# syntax=docker/dockerfile:1.7
# toolgate container images. Two targets share one build stage:
#
#   runtime        (default) distroless cc-debian12: glibc, libgcc/libstdc++, CA certificates,
#                  tzdata, user nonroot (65532). No shell, no package manager, no git.
#   runtime-tools  debian:bookworm-slim + git + CA certificates, same user, same layout: for
#                  `command` tools that run programs (deploy/tools/git_log.toml runs git). Add the
#                  programs your command tools need there, and list them in
#                  [tools.command] allowed_programs.
#
#   docker build -t toolgate .                                  # distroless
#   docker build -t toolgate:tools --target runtime-tools .     # with git
#   docker run --rm -p 8080:8080 -e TOOLGATE__AUTH__MODE=off \
#       -e TOOLGATE__ADMIN__BIND=127.0.0.1:8081 -v toolgate-data:/var/lib/toolgate toolgate
#
# Settings: every one can be given as TOOLGATE__SECTION__KEY (deploy/config/toolgate.example.toml
# lists them all), or in a file: -v ./toolgate.toml:/etc/toolgate/toolgate.toml:ro
# -e TOOLGATE_CONFIG=/etc/toolgate/toolgate.toml (environment variables override the file).
# Tool definitions: -v ./tools:/etc/toolgate/tools:ro -e TOOLGATE__TOOLS__PATH=/etc/toolgate/tools.
#
# What the image sets (override any of them):
#   public listener 0.0.0.0:8080 (/mcp, /sse, /messages, /healthz, /readyz, RFC 9728 metadata)
#   admin listener  0.0.0.0:8081 (/admin/..., /metrics). Never publish it to the internet. With
#                   auth.mode = "off" the admin API has no authentication, so toolgate refuses a
#                   non-loopback admin bind: set TOOLGATE__ADMIN__BIND=127.0.0.1:8081 (or
#                   TOOLGATE__ADMIN__ENABLED=false) when you run with auth off.
#   data            /var/lib/toolgate/data (SQLite database, audit spool), csv_dir
#                   /var/lib/toolgate/csv (kept apart from the data directory), one volume
#                   /var/lib/toolgate for both.
#   logs            JSON lines on stdout.
#
# Authentication: the default auth mode ("dev") only serves on loopback, so a container (which
# binds 0.0.0.0) refuses to start until auth is configured: TOOLGATE__AUTH__MODE=jwt with
# TOOLGATE__AUTH__RESOURCE and [[auth.issuers]] in a mounted config file (deploy/auth/), or
# TOOLGATE__AUTH__MODE=off by explicit choice. Behind a load balancer set
# TOOLGATE__SERVER__ALLOWED_HOSTS to the public host name(s), or requests get 403.
#
# Shutdown: on SIGTERM readiness turns 503, streams end with retry hints, in-flight work gets
# server.shutdown_grace_secs (20 s) and the audit writer up to 10 s more: give the container
# longer than that before it is killed (docker stop -t 35, compose stop_grace_period: 35s,
# Kubernetes terminationGracePeriodSeconds: 45 with its 5 s preStop sleep). See deploy/README.md.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# ---- build ----------------------------------------------------------------------------------
# Debian 12 (bookworm) build image, so the binary's glibc matches the runtime images'.
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /build
ENV CARGO_TERM_COLOR=never \
    CARGO_INCREMENTAL=0

# 1. Dependencies, in their own layer: rebuilt only when Cargo.toml or Cargo.lock change, not on
#    every source edit. The crate's own targets are empty stand-ins here, deleted afterwards
#    (artifacts and fingerprints) so step 2 always compiles the real crate whatever the mtimes.
#    build.rs is left out here (cargo runs it only when present) and added in step 2, so editing
#    it does not rebuild the dependencies. (Add any extra [[bin]]/[lib] path here if the
#    manifest ever gains one.)
COPY Cargo.toml Cargo.lock ./
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && : > src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src target/release/toolgate target/release/toolgate.d target/release/libtoolgate.* \
              target/release/deps/toolgate-* target/release/deps/libtoolgate-* \
              target/release/.fingerprint/toolgate-*

# 2. The crate itself. build.rs stamps the commit into toolgate_build_info{git_sha}; there is no
#    .git in the build context, so it comes from the build argument
#    (docker build --build-arg TOOLGATE_GIT_SHA="$(git rev-parse --short HEAD)" ., else "unknown").
#    sqlx::migrate! embeds migrations/ into the binary at compile time, so they are part of the
#    build (nothing to copy into the runtime image). Then two guards: the binary is the real one
#    (the stand-in prints nothing for --version), and every shared library it links is one both
#    runtime images have (glibc, libgcc_s, libstdc++).
ARG TOOLGATE_GIT_SHA=""
COPY build.rs ./
COPY src ./src
COPY migrations ./migrations
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    cargo build --release --locked --bin toolgate \
    && install -D -m 0755 target/release/toolgate /out/bin/toolgate \
    && /out/bin/toolgate --version | grep -q '^toolgate ' \
    && ldd /out/bin/toolgate | awk '$1 !~ /^(linux-vdso|(\/lib(64)?\/)?ld-linux|libc\.|libm\.|libgcc_s\.|libstdc\+\+\.|libdl\.|libpthread\.|librt\.)/ { print "unexpected shared library: " $0; bad = 1 } END { exit bad }' \
    && install -d -m 0750 /out/state/toolgate /out/state/toolgate/data /out/state/toolgate/csv

# ---- runtime with tools: Debian slim + git -------------------------------------------------
FROM debian:${DEBIAN_RELEASE}-slim AS runtime-tools
ARG TOOLGATE_GIT_SHA=""
LABEL org.opencontainers.image.title="toolgate (with git, for command tools)" \
      org.opencontainers.image.revision="${TOOLGATE_GIT_SHA}" \
      org.opencontainers.image.licenses="Apache-2.0"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
               --shell /usr/sbin/nologin nonroot
COPY --from=builder /out/bin/toolgate /usr/local/bin/toolgate
COPY --from=builder --chown=65532:65532 /out/state/ /var/lib/
USER 65532:65532
WORKDIR /var/lib/toolgate
ENV TOOLGATE__SERVER__BIND=0.0.0.0:8080 \
    TOOLGATE__ADMIN__BIND=0.0.0.0:8081 \
    TOOLGATE__STORAGE__DATA_DIR=/var/lib/toolgate/data \
    TOOLGATE__TOOLS__CSV_DIR=/var/lib/toolgate/csv \
    TOOLGATE__LOG__FORMAT=json
VOLUME ["/var/lib/toolgate"]
EXPOSE 8080 8081
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/toolgate", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve"]

# ---- runtime (default): distroless -------------------------------------------------------------
# glibc + libgcc_s (all the binary links: ldd shows libc, libm, libgcc_s), CA certificates,
# tzdata; user "nonroot" is 65532:65532. Note: toolgate's own HTTPS clients (JWKS, introspection,
# HTTP tools) trust the Mozilla roots compiled into the binary (webpki-roots), not
# /etc/ssl/certs, so adding a private CA to the image does not make toolgate trust it. Pin by digest in your release pipeline
# (gcr.io/distroless/cc-debian12:nonroot@sha256:...).
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
ARG TOOLGATE_GIT_SHA=""

LABEL org.opencontainers.image.title="toolgate" \
      org.opencontainers.image.revision="${TOOLGATE_GIT_SHA}" \
      org.opencontainers.image.description="A production remote MCP server: tools over Streamable HTTP, both protocol eras." \
      org.opencontainers.image.licenses="Apache-2.0"

# The binary belongs to root (the server cannot replace it); the state directory to the runtime
# user (distroless has no shell to mkdir/chown in).
COPY --from=builder /out/bin/toolgate /usr/local/bin/toolgate
COPY --from=builder --chown=65532:65532 /out/state/ /var/lib/

USER 65532:65532
WORKDIR /var/lib/toolgate
ENV TOOLGATE__SERVER__BIND=0.0.0.0:8080 \
    TOOLGATE__ADMIN__BIND=0.0.0.0:8081 \
    TOOLGATE__STORAGE__DATA_DIR=/var/lib/toolgate/data \
    TOOLGATE__TOOLS__CSV_DIR=/var/lib/toolgate/csv \
    TOOLGATE__LOG__FORMAT=json
VOLUME ["/var/lib/toolgate"]
# 8080 public (behind the load balancer), 8081 admin API + /metrics (private network only)
EXPOSE 8080 8081

# `toolgate healthcheck` GETs /healthz on the configured bind address (no curl, no shell here).
# Kubernetes ignores HEALTHCHECK: deploy/k8s/deployment.yaml has httpGet probes instead.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/toolgate", "healthcheck"]

ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve"]
