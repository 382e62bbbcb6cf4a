# A static binary (musl, rustls: no libc or OpenSSL at run time) in a distroless image that
# runs as non-root. Build: docker build -t cluster-autoscaler-rs:0.1.0 .
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p cluster-autoscaler \
    && cp target/x86_64-unknown-linux-musl/release/cluster-autoscaler /cluster-autoscaler

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /cluster-autoscaler /cluster-autoscaler
USER 65532:65532
EXPOSE 8085
ENTRYPOINT ["/cluster-autoscaler"]
CMD ["run"]
