# syntax=docker/dockerfile:1

# esm in a container: a static binary on distroless.
#
#   docker build -t esm --build-arg VERSION=$(git describe --tags --always) .
#   docker run --rm esm version
#   docker run --rm -p 127.0.0.1:9090:9090 -v "$PWD/template.yaml:/config/template.yaml:ro" \
#     -e AWS_REGION -e AWS_ACCESS_KEY_ID -e AWS_SECRET_ACCESS_KEY -e AWS_SESSION_TOKEN \
#     esm run --template /config/template.yaml --metrics-addr 0.0.0.0:9090 --log-format json
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 . (the build stage runs
# on the builder's platform and cross-compiles; cgo is off, so no cross toolchain is needed).

# The Go of go.mod's go line.
ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Never fetch another toolchain: the image's Go is the one go.mod asks for.
ENV GOTOOLCHAIN=local CGO_ENABLED=0
# Modules first, so that a source change does not download them again. The main module requires
# the fakes' module (fake/) through a replace directive, so its go.mod is read too.
COPY go.mod go.sum ./
COPY fake/go.mod fake/go.sum ./fake/
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/esm ./cmd/esm

# distroless/static holds CA certificates (for the AWS endpoints), tzdata and /etc/passwd with
# the nonroot user (65532), and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/esm /esm
# Relative paths (--state-dir .esm, template.yaml) resolve here, a directory nonroot may write.
# With --lease-table, progress lives in DynamoDB and nothing is written locally.
WORKDIR /home/nonroot
USER nonroot:nonroot
# The metrics, /healthz and /readyz port when run with --metrics-addr 0.0.0.0:9090. esm binds
# 127.0.0.1:9090 by default, which nothing outside the container reaches, so a container passes
# 0.0.0.0:9090 explicitly. EXPOSE only documents the port.
EXPOSE 9090
# No HEALTHCHECK: Docker runs a HEALTHCHECK command inside the container, and this image has no
# shell, curl or wget to run it with (esm has no self-probe subcommand). Orchestrators probe
# /healthz and /readyz over HTTP from outside instead: Kubernetes liveness and readiness probes
# (deploy/kubernetes/esm.yaml), an ECS target group's health check.
ENTRYPOINT ["/esm"]
CMD ["run"]
