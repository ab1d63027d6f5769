# Builds the HyperFleet binaries into a small runtime image.
#   docker build -t hyperfleet/hyperfleet-api .
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
