# syntax=docker/dockerfile:1
# The Book controller image: a static binary on distroless, run as non-root.
#
#   docker build -t book-controller:latest .          # or: make docker-build IMG=...
#
# test/integration/deploy runs this file's `go build` line and checks the
# binary is static, so keep that command on one RUN.

# Build on the builder's own platform and cross-compile for the target one
# (docker buildx build --platform linux/arm64 ...), without emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
# What `book-controller --version` prints: hack/version.sh and
# hack/version.sh --commit (make docker-build passes both); the context has
# no .git to read them from.
ARG VERSION
ARG COMMIT
WORKDIR /src

# Modules first, so this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY cmd/ cmd/
COPY pkg/ pkg/
# CGO_ENABLED=0: a static binary, which distroless/static (no libc) needs.
# -tags grpcnotrace: gRPC (pulled in by k8s.io/apiserver's metrics
# authentication) would otherwise import golang.org/x/net/trace, whose
# templates make the linker keep every exported method: 69 MB instead of 40.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -tags grpcnotrace -trimpath -gcflags=all=-dwarf=false -ldflags="-s -w -X main.gitVersion=${VERSION} -X main.gitCommit=${COMMIT}" -o /book-controller ./cmd/controller

# No shell, no package manager, no libc: CA certificates, tzdata, /etc/passwd
# with the nonroot user (65532), and the binary.
FROM gcr.io/distroless/static:nonroot
COPY --from=builder /book-controller /book-controller
USER 65532:65532
ENTRYPOINT ["/book-controller"]
