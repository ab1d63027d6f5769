# Builds every HyperFleet binary into one small runtime image; the API is the default entry point, the adapters
# and simulators are chosen with --entrypoint:
#   docker build -t hyperfleet/hyperfleet .
#   docker run --entrypoint /usr/local/bin/version-resolver hyperfleet/hyperfleet --api-url http://api:8000 …
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG BUILD=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.build=${BUILD}" -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER nonroot
EXPOSE 8000 8080 9090
ENTRYPOINT ["/usr/local/bin/hyperfleet-api"]
CMD ["serve"]
