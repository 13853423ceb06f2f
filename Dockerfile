# syntax=docker/dockerfile:1
# The vineyard image: the static vineyardd and vineyardctl, run as the
# non-root user vineyard (65532), on an otherwise empty file system
# (deploy/docker/rootfs.sh lays it out). `make test-image` runs the daemon
# chrooted into that same file system, without shared libraries or /dev/shm.
#
#   docker build -t vineyard-go:$(cat VERSION) .
#   docker run --rm -v /var/run/vineyard:/var/run/vineyard vineyard-go:0.1.0 --size 1Gi
#
# The socket directory /var/run/vineyard must be writable by uid 65532 (the
# Helm chart's init container sets that up on the host path).

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The same static build `make test-image` checks (CGO_ENABLED=0).
RUN make image-binaries && deploy/docker/rootfs.sh build/image /rootfs

FROM scratch
# COPY sets ownership to root unless told: the socket directory is given to
# the runtime user again.
COPY --from=build /rootfs/ /
COPY --from=build --chown=65532:65532 /rootfs/var/run/vineyard/ /var/run/vineyard/
USER 65532:65532
ENV VINEYARD_IPC_SOCKET=/var/run/vineyard/vineyard.sock
# The daemon's RPC listener (9600) and, with --metrics-port, its metrics.
EXPOSE 9600
ENTRYPOINT ["/usr/local/bin/vineyardd", "--socket", "/var/run/vineyard/vineyard.sock"]
CMD ["--size", "256Mi"]
