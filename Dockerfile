# syntax=docker/dockerfile:1
# toolgate container image: a static-ish Rust binary on distroless (no shell, no package manager),
# running as a non-root user.
#
#   docker build -t toolgate .
#   docker run --rm -p 8080:8080 toolgate
#   docker run --rm -p 8080:8080 -e TOOLGATE__SERVER__ALLOWED_HOSTS=mcp.example.com \
#       -e TOOLGATE__SERVER__ALLOWED_ORIGINS=https://app.example.com \
#       -v toolgate-data:/var/lib/toolgate toolgate
#
# Every setting can be given as TOOLGATE__SECTION__KEY (see deploy/config/toolgate.example.toml),
# or in a file: -v ./toolgate.toml:/etc/toolgate/toolgate.toml:ro -e TOOLGATE_CONFIG=/etc/toolgate/toolgate.toml
#
# Host checking (DNS-rebinding protection) stays on in the image: by default only the Host names
# localhost, 127.0.0.1 and [::1] are accepted, which is what `curl localhost:8080` through a
# published port sends. Behind a load balancer or ingress, set TOOLGATE__SERVER__ALLOWED_HOSTS to the
# public host name(s) clients use (comma-separated), and ALLOWED_ORIGINS for browser clients.
#
# Authentication: the default auth mode ("dev") only serves on loopback, so the container (which
# binds 0.0.0.0) refuses to start until auth is configured: TOOLGATE__AUTH__MODE=jwt with
# TOOLGATE__AUTH__RESOURCE and [[auth.issuers]] in a mounted config file (deploy/auth/ has
# guides per identity provider), or TOOLGATE__AUTH__MODE=off by explicit choice.
#
# Shutdown: on SIGTERM in-flight work gets server.shutdown_grace_secs (20 s by default) to finish;
# give the container longer than that before it is killed (docker stop -t 30, Kubernetes
# terminationGracePeriodSeconds: 30).

# ---- build ----------------------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /build

# Dependencies first, in their own layer: it is rebuilt only when Cargo.toml or Cargo.lock
# change, not on every source edit. The crate's own targets are empty stand-ins here.
# (Add any build.rs or extra [[bin]]/[lib] path here too if the manifest ever gains one.)
COPY Cargo.toml Cargo.lock ./
RUN mkdir src \
    && echo 'fn main() {}' > src/main.rs \
    && : > src/lib.rs \
    && cargo build --release --locked \
    && rm -rf src

# The crate itself. COPY may give the real files older mtimes than the stand-ins had, and cargo
# decides freshness by mtime, so touch the entry points to force the crate to be rebuilt.
COPY src ./src
# sqlx embeds the migrations into the binary at compile time.
COPY migrations ./migrations
RUN touch src/main.rs src/lib.rs \
    && cargo build --release --locked --bin toolgate \
    && install -D -m 0755 target/release/toolgate /out/bin/toolgate \
    && install -d -m 0750 /out/lib/toolgate /out/lib/toolgate/data /out/lib/toolgate/data/csv \
    && /out/bin/toolgate --version

# ---- runtime --------------------------------------------------------------------------------
# glibc + libgcc only (all the binary links against); user "nonroot" is uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot

LABEL org.opencontainers.image.title="toolgate" \
      org.opencontainers.image.description="A production remote MCP server: tools over Streamable HTTP, both protocol eras." \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=builder /out/bin/toolgate /usr/local/bin/toolgate
# the data directory, owned by the runtime user (distroless has no shell to mkdir/chown in)
COPY --from=builder --chown=65532:65532 /out/lib/ /var/lib/

USER 65532:65532
WORKDIR /var/lib/toolgate
ENV TOOLGATE__SERVER__BIND=0.0.0.0:8080 \
    TOOLGATE__STORAGE__DATA_DIR=/var/lib/toolgate/data \
    TOOLGATE__TOOLS__CSV_DIR=/var/lib/toolgate/data/csv \
    TOOLGATE__LOG__FORMAT=json
VOLUME ["/var/lib/toolgate"]
EXPOSE 8080

# `toolgate healthcheck` GETs /healthz on the configured bind address (no curl in the image).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/toolgate", "healthcheck"]

ENTRYPOINT ["/usr/local/bin/toolgate"]
CMD ["serve"]
