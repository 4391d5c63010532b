# hub-follower: a sidecar in every worker pod, so the image is the binary and nothing else.
# Build: docker build -t hub-follower:dev .

FROM docker.io/library/rust:1.95.0-slim-bookworm AS builder
WORKDIR /src
# A static binary: `hub-follower install` copies it into the worker's container for the exec
# wrapper, and the worker's image may have no libc at all (distroless/static). glibc's built-in
# "files" and "dns" lookups work without shared NSS modules.
ENV RUSTFLAGS="-C target-feature=+crt-static"
# Dependencies first, so that a source change does not rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY benches ./benches
RUN mkdir src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && cargo build --release --locked --bin hub-follower --target "$(rustc -vV | sed -n 's/^host: //p')" \
 && rm -rf src
COPY src ./src
# The stub's artifacts are older than the real sources; touch so cargo rebuilds the crate.
RUN touch src/main.rs src/lib.rs \
 && target="$(rustc -vV | sed -n 's/^host: //p')" \
 && cargo build --release --locked --bin hub-follower --target "$target" \
 && cp "target/$target/release/hub-follower" /hub-follower

# Nothing but the binary (checked by tests/image), as a numeric non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /hub-follower /hub-follower
USER 65532:65532
EXPOSE 8095
ENTRYPOINT ["/hub-follower"]
LABEL org.opencontainers.image.title="hub-follower" \
      org.opencontainers.image.description="Lets a KubeSlice worker follow its controller through an Active/Standby failover" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kubeslice/hub-follower"
