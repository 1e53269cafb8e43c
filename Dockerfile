# The Playground image, for users with Docker or BuildKit:
#
#   docker build -t my-registry.example/playground:v0.1.0 .
#
# It is not built on the project's own machines, which have no container
# daemon and no registry: there `make image` (hack/image.sh) builds the
# same image daemonlessly, from the same Debian suite and the same package
# list (hack/image/packages.txt, read by both; test/image checks that the
# two builds agree on the suite, the binaries and where they go). The two
# do not give the same digest: this one's base is debian:<suite>-slim.
#
# One image for every component: playground is the entrypoint and the
# component's role (manager, agent, gateway) its first argument, as the
# chart and config/ pass it. playground-sandbox (the in-sandbox init) sits
# next to it, where the agent looks for it; so does playground-example-worker,
# an MCP worker to try the workers catalog with.
# The agent's oci backend bind-mounts this image's /usr, /bin, /lib… into
# every sandbox: the packages below are also the sandboxes' userland.

ARG GO_VERSION=1.26
ARG DEBIAN_SUITE=bookworm

FROM golang:${GO_VERSION}-${DEBIAN_SUITE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static, without paths or VCS stamps, stripped: as hack/image.sh builds them.
ENV CGO_ENABLED=0
RUN for cmd in playground playground-sandbox kubectl-playground playground-example-worker; do \
		go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o /out/$cmd ./cmd/$cmd || exit 1; \
	done
# gVisor's runtime, for Sandboxes of isolation gvisor, at hack/runsc.sh's
# RUNSC_VERSION and built as it builds it.
ARG RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237
RUN cd / && GOBIN=/out GOFLAGS=-trimpath go install -ldflags "-s -w" "gvisor.dev/gvisor/runsc@${RUNSC_VERSION}"

FROM debian:${DEBIAN_SUITE}-slim
COPY hack/image/packages.txt /tmp/packages.txt
RUN apt-get update \
	&& sed 's/#.*//' /tmp/packages.txt | xargs env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
	&& rm -rf /var/lib/apt/lists/* /tmp/packages.txt
COPY --from=build /out/ /usr/local/bin/
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ENTRYPOINT ["/usr/local/bin/playground"]
