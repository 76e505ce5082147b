# corput's image: one static binary on a distroless base, run as a non-root
# user (docs/deployment.md, "The image"). `go test ./deploy` parses this
# file and checks it against the binary and the Kubernetes manifests.

# The build stage: the Go release go.mod asks for.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# The modules first, so that a change of the source reuses their layer.
COPY go.mod go.sum ./
RUN go mod download
# The whole checkout, .git included: the toolchain stamps the commit into
# the binary (`corput --version`, GET /admin/config). Build from a clone:
# from a git worktree, whose .git is a file, the commit is not stamped.
COPY . .
# Static (no cgo, so no libc to find at run time), with no file system
# paths (-trimpath) and no symbol or debug tables (-s -w).
RUN CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o /out/corput ./cmd/corput

# The runtime stage: distroless static holds CA certificates (origins and
# xDS servers verified against the system roots), time zones and a passwd
# entry for nonroot (65532), and no shell or package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/corput /corput
# Numeric, so that the kubelet can check runAsNonRoot against it.
USER 65532:65532
ENTRYPOINT ["/corput"]
CMD ["serve", "--config", "/etc/corput/corput.yaml"]
