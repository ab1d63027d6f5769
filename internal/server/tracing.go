package server

import (
	"context"
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// tracing wraps the API handler in OpenTelemetry spans exported over OTLP/HTTP. The provider is passed to the
// instrumentation rather than installed globally, so nothing else in the process is affected.
type tracing struct {
	provider *sdktrace.TracerProvider
}

// startTracing builds the exporter: the endpoint is cfg.OTLPEndpoint, or the standard OTEL_EXPORTER_OTLP_*
// environment when empty; cfg.TraceSampleRatio of new traces are kept (incoming sampled parents always are).
func startTracing(ctx context.Context, cfg Config) (*tracing, error) {
	var opts []otlptracehttp.Option
	if cfg.OTLPEndpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(cfg.OTLPEndpoint))
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("hyperfleet-api"), semconv.ServiceVersion(cfg.Version))
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.TraceSampleRatio))),
	)
	return &tracing{provider: provider}, nil
}

func (t *tracing) wrap(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "hyperfleet-api",
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithPropagators(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "HTTP " + r.Method }))
}

// shutdown flushes the spans still buffered.
func (t *tracing) shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }
