# The backlog job server as a container image.
#
#   docker build --build-arg VERSION=v1.2.3 -t backlog .
#   docker run -d -p 8080:8080 -v backlog-data:/data \
#     -e BACKLOG_ADMIN_TOKEN="$(openssl rand -hex 32)" backlog
#
# The image runs `backlog serve` on the SQLite file /data/backlog.db (a
# volume), listening on 0.0.0.0:8080. The server refuses to listen beyond
# loopback without a token: pass BACKLOG_ADMIN_TOKEN (and optionally
# BACKLOG_PRODUCER_TOKEN, BACKLOG_WORKER_TOKEN). Other stores: override the
# command, e.g. `serve --db postgres://… --listen 0.0.0.0:8080`
# (examples/deploy/compose.yaml). The final stage is Alpine, not distroless,
# because shell handlers (--handler KIND='COMMAND') run with sh -c.
# scripts/container-check.sh performs these steps without a container engine.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/backlogq/backlog/cli.version=${VERSION}" -o /out/backlog ./cmd/backlog

FROM alpine:3.22
RUN addgroup -S -g 10001 backlog && \
    adduser -S -D -H -u 10001 -G backlog -h /data -s /sbin/nologin backlog && \
    mkdir -p /data && chown 10001:10001 /data
COPY --from=build /out/backlog /usr/local/bin/backlog
COPY LICENSE /usr/share/doc/backlog/LICENSE
USER 10001:10001
WORKDIR /data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD wget -q -T 4 -O /dev/null http://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["/usr/local/bin/backlog"]
CMD ["serve", "--db", "sqlite:/data/backlog.db", "--listen", "0.0.0.0:8080"]
