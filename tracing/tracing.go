package tracing

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
)

// Attribute keys of an invocation's span.
const (
	KeyMappingID        = attribute.Key("aws.lambda.resource_mapping.id")
	KeyTrigger          = attribute.Key("faas.trigger")
	KeyInvokedName      = attribute.Key("faas.invoked_name")
	KeyInvokedProvider  = attribute.Key("faas.invoked_provider")
	KeyInvokedRegion    = attribute.Key("faas.invoked_region")
	KeySystem           = attribute.Key("messaging.system")
	KeyOperationType    = attribute.Key("messaging.operation.type")
	KeyDestinationName  = attribute.Key("messaging.destination.name")
	KeyPartitionID      = attribute.Key("messaging.destination.partition.id")
	KeyBatchCount       = attribute.Key("messaging.batch.message_count")
	KeyFirstSequence    = attribute.Key("esm.batch.first_sequence_number")
	KeyLastSequence     = attribute.Key("esm.batch.last_sequence_number")
	KeyOutcome          = attribute.Key("esm.outcome")
	KeyAttempt          = attribute.Key("esm.invocation.attempt")    // 1 for a batch's first invocation
	KeyIteratorAge      = attribute.Key("esm.batch.iterator_age_ms") // the age of the batch's last record when sent
	KeyErrorType        = attribute.Key("error.type")                // the outcome of a failed invocation
	instrumentationName = "github.com/kinesis-esm/esm/tracing"
)

// Mapping names the traced mapping; the stream and its region come with each invocation.
type Mapping struct {
	FunctionName string
	// UUID is the mapping's UUID; it may come later, from SetMappingUUID.
	UUID string
}

// Tracer is a poller.Tracer that makes one OpenTelemetry span per invocation. Safe for
// concurrent use.
type Tracer struct {
	tracer trace.Tracer
	attrs  []attribute.KeyValue // the mapping's, without its UUID
	uuid   atomic.Pointer[string]
}

var _ poller.Tracer = (*Tracer)(nil)

// NewTracer returns a tracer of m's invocations whose spans tp makes.
func NewTracer(tp trace.TracerProvider, m Mapping) *Tracer {
	t := &Tracer{tracer: tp.Tracer(instrumentationName), attrs: []attribute.KeyValue{
		KeyTrigger.String("pubsub"),
		KeyInvokedName.String(m.FunctionName),
		KeyInvokedProvider.String("aws"),
		KeyOperationType.String("process"),
	}}
	if m.UUID != "" {
		t.SetMappingUUID(m.UUID)
	}
	return t
}

// messagingSystem is messaging.system of a source's eventSource: aws_kinesis (also when unknown),
// aws_dynamodb_streams.
func messagingSystem(eventSource string) string {
	if eventSource == "aws:dynamodb" {
		return "aws_dynamodb_streams"
	}
	return "aws_kinesis"
}

// SetMappingUUID sets the mapping's UUID, which spans started from then on carry.
func (t *Tracer) SetMappingUUID(id string) { t.uuid.Store(&id) }

// StartInvocation starts the span of inv, after the span of the invocation that led to it, and
// returns ctx with the span and its X-Ray trace header (invoke.WithTraceHeader).
func (t *Tracer) StartInvocation(ctx context.Context, after poller.InvocationSpan, inv poller.Invocation) (context.Context, poller.InvocationSpan) {
	attrs := make([]attribute.KeyValue, 0, len(t.attrs)+8)
	attrs = append(attrs, t.attrs...)
	if id := t.uuid.Load(); id != nil {
		attrs = append(attrs, KeyMappingID.String(*id))
	}
	if inv.Region != "" {
		attrs = append(attrs, KeyInvokedRegion.String(inv.Region))
	}
	attrs = append(attrs, KeySystem.String(messagingSystem(inv.EventSource)))
	attrs = append(attrs, KeyDestinationName.String(inv.StreamName))
	attrs = append(attrs, KeyPartitionID.String(inv.ShardID), KeyBatchCount.Int(inv.BatchSize),
		KeyFirstSequence.String(inv.FirstSequenceNumber), KeyLastSequence.String(inv.LastSequenceNumber),
		KeyAttempt.Int(inv.Attempt), KeyIteratorAge.Int64(inv.IteratorAge.Milliseconds()))
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
	parent := ctx
	if a, ok := after.(*span); ok {
		if inv.NewTrace { // a long retry chain goes on in a new trace, linked to its previous one
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: a.s.SpanContext()}))
		} else {
			parent = trace.ContextWithSpanContext(ctx, a.s.SpanContext())
		}
	}
	ctx, s := t.tracer.Start(parent, "process "+inv.StreamName, opts...)
	if h := XRayHeader(s.SpanContext()); h != "" {
		ctx = invoke.WithTraceHeader(ctx, h)
	}
	return ctx, &span{s: s}
}

type span struct{ s trace.Span }

// End records the outcome; any but ok is an error, whose message is the status' description.
func (s *span) End(outcome, message string) {
	s.s.SetAttributes(KeyOutcome.String(outcome))
	if outcome != poller.OutcomeOK {
		s.s.SetAttributes(KeyErrorType.String(outcome))
		s.s.SetStatus(codes.Error, cmp.Or(message, outcome))
	}
	s.s.End()
}

// XRayHeader renders sc as the X-Ray trace header Lambda passes a function
// (Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=<0|1>), or "" when sc is not valid.
func XRayHeader(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	id, sampled := sc.TraceID().String(), "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	return "Root=1-" + id[:8] + "-" + id[8:] + ";Parent=" + sc.SpanID().String() + ";Sampled=" + sampled
}

// FromEnvironment returns the tracer provider the standard OTEL_* variables describe, exporting
// over OTLP/HTTP (protobuf), or nil when they leave tracing off. Tracing is on when
// OTEL_TRACES_EXPORTER is otlp, or when it is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// turn it off. The exporter reads the OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout,
// compression, certificates), the sampler OTEL_TRACES_SAMPLER(_ARG), the batcher OTEL_BSP_*, the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name defaults to esm). Other
// exporters and protocols are refused. The caller shuts the provider down, which flushes it.
// Export errors (a collector down or refusing) are logged with log as warnings: FromEnvironment
// makes it OpenTelemetry's global error handler, so they follow the configured log format.
func FromEnvironment(ctx context.Context, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch exp := os.Getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, nil
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: esm exports traces with otlp only (or none)", exp)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s %q: esm exports traces over http/protobuf only", v, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "esm")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("trace export failed", "endpoint", Endpoint(), "err", err)
	}))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Endpoint is where FromEnvironment's exporter sends spans: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// as it is, else OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces, else the exporter's default.
func Endpoint() string {
	if e := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e != "" {
		return e
	}
	if e := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); e != "" {
		return strings.TrimSuffix(e, "/") + "/v1/traces"
	}
	return "https://localhost:4318/v1/traces"
}
