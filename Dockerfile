# syntax=docker/dockerfile:1
# k8sailor as a static binary on distroless: no shell, no libc, runs as 65532:65532.
#
#   docker build -t k8sailor:latest .
#   kubectl apply -k config/
#
# No Docker at hand? hack/image-build-check runs the same build steps on the host and checks
# that the binary is static.

FROM rust:1.95-bookworm AS build
# ring compiles a little C and assembly: musl-gcc (musl-tools) is its C compiler for the musl
# target. kube uses rustls with ring, so there is no OpenSSL to link.
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/*
RUN rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin k8sailor --target x86_64-unknown-linux-musl \
 && cp target/x86_64-unknown-linux-musl/release/k8sailor /k8sailor
# Fails the build if the binary is not self-contained or does not run.
RUN /k8sailor version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /k8sailor /k8sailor
USER 65532:65532
EXPOSE 8088
ENTRYPOINT ["/k8sailor", "httpserver"]
# Arguments given to the container replace these, so keep --listen when passing your own.
# Listening on every address, it authenticates callers: without auth, k8sailor refuses a
# reachable address unless --allow-unauthenticated says so.
CMD ["--listen", "0.0.0.0:8088", "--auth", "delegated"]
