# hub-follower: a sidecar in every worker pod, so the image is the binary and nothing else.
# Build: docker build -t hub-follower:dev .

FROM docker.io/library/rust:1.95.0-slim-bookworm AS builder
WORKDIR /src
# Dependencies first, so that a source change does not rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY benches ./benches
RUN mkdir src && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && cargo build --release --locked --bin hub-follower \
 && rm -rf src
COPY src ./src
# The stub's artifacts are older than the real sources; touch so cargo rebuilds the crate.
RUN touch src/main.rs src/lib.rs \
 && cargo build --release --locked --bin hub-follower \
 && cp target/release/hub-follower /hub-follower

# glibc and libgcc only (checked by tests/image): distroless "cc", as a numeric non-root user.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /hub-follower /hub-follower
USER 65532:65532
EXPOSE 8095
ENTRYPOINT ["/hub-follower"]
LABEL org.opencontainers.image.title="hub-follower" \
      org.opencontainers.image.description="Lets a KubeSlice worker follow its controller through an Active/Standby failover" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/kubeslice/hub-follower"
