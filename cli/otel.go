package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// defaultServiceName is the service.name of serve's and work's spans
// unless OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES)
// says otherwise.
const defaultServiceName = "backlog"

// tracingWanted reads the standard OpenTelemetry variables (the SDK
// environment specification) through getenv and reports whether serve and
// work export traces: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) with
// OTEL_TRACES_EXPORTER unset. OTEL_TRACES_EXPORTER=none and
// OTEL_SDK_DISABLED=true turn tracing off. It returns a usage error for an
// exporter other than otlp and none, and for an OTLP protocol other than
// http/protobuf (the only one built in).
func tracingWanted(getenv func(string) string) (bool, error) {
	if getenv == nil {
		return false, nil
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	on := env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if v := env("OTEL_TRACES_EXPORTER"); v != "" {
		on = false
		for e := range strings.SplitSeq(v, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "otlp":
				on = true
			case "none", "":
			default:
				return false, usagef("OTEL_TRACES_EXPORTER=%s: exporter %q is not built in; use otlp (or none)", v, e)
			}
		}
	}
	if !on {
		return false, nil
	}
	proto := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return false, usagef("OTLP protocol %q is not built in: set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf (the collector's port 4318)", proto)
	}
	return true, nil
}

// tracerProvider returns the tracer provider of serve and work, exporting
// with OTLP over HTTP as the OTEL_* variables configure it (endpoint,
// headers, timeout, TLS, compression: the exporter reads them; sampling
// from OTEL_TRACES_SAMPLER, batching from OTEL_BSP_*), and a function that
// flushes the spans still buffered and shuts it down, to call after the
// workers stopped. Without tracing (see tracingWanted) it returns a nil
// provider, which core reads as tracing off, and a no-op function.
func (a *app) tracerProvider(ctx context.Context) (trace.TracerProvider, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	on, err := tracingWanted(a.env.getenv)
	if err != nil || !on {
		return nil, noop, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, noop, fmt.Errorf("OpenTelemetry: OTLP trace exporter: %w", err)
	}
	res, err := tracingResource(ctx)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, noop, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, tp.Shutdown, nil
}

// tracingResource describes this process: service.name "backlog" and the
// binary's version, overridden by OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, plus the SDK's own attributes.
func tracingResource(ctx context.Context) (*resource.Resource, error) {
	res, err := resource.New(ctx,
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(defaultServiceName), semconv.ServiceVersion(readBuildVersion().Version)),
		resource.WithFromEnv(), // later detectors win: the variables override the defaults
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry: resource from OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME: %w", err)
	}
	return res, nil
}

// tracingFlushTimeout bounds the flush of buffered spans at shutdown.
const tracingFlushTimeout = 5 * time.Second

// flushTracing runs stop (tracerProvider's) with tracingFlushTimeout and
// reports its failure on stderr.
func (a *app) flushTracing(ctx context.Context, stop func(context.Context) error) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
	defer cancel()
	if err := stop(fctx); err != nil {
		fmt.Fprintf(a.env.stderr, "backlog: OpenTelemetry: flushing spans: %v\n", err)
	}
}
