package runner

import (
	"slices"
	"time"

	"github.com/kinesis-esm/esm/poller"
)

// ReportBatchItemFailures is the one FunctionResponseTypes value Lambda accepts.
const ReportBatchItemFailures = "ReportBatchItemFailures"

// Settings are a mapping's settings in Lambda's API terms, as flags, the ESM API's Create and
// Update requests give them: a nil field was not given, and leaves the poller.Config it is applied
// to as it is (the template's value, or, for a zero field, Lambda's default, which poller defines).
// It is the one way from flags and API requests to poller.Config.
type Settings struct {
	BatchSize                      *int
	MaximumBatchingWindowInSeconds *int
	StartingPosition               *string
	StartingPositionTimestamp      *time.Time
	Enabled                        *bool
	ParallelizationFactor          *int
	BisectBatchOnFunctionError     *bool
	MaximumRetryAttempts           *int
	MaximumRecordAgeInSeconds      *int
	TumblingWindowInSeconds        *int
	FunctionResponseTypes          *[]string
	// OnFailureDestination is DestinationConfig.OnFailure.Destination; "" removes it.
	OnFailureDestination *string
	// FilterPatterns are FilterCriteria's patterns; an empty list removes the filters.
	FilterPatterns *[]string
}

// Apply sets the given fields in mc. An explicit 0 where 0 is out of range (BatchSize,
// ParallelizationFactor) is an error, not "the default". Everything else is checked by
// mc.Validate.
func (s Settings) Apply(mc *poller.Config) error {
	if s.BatchSize != nil {
		if *s.BatchSize == 0 {
			return poller.RangeError("batchSize", 0, 1, poller.MaxBatchSize)
		}
		mc.BatchSize = *s.BatchSize
	}
	if s.ParallelizationFactor != nil {
		if *s.ParallelizationFactor == 0 {
			return poller.RangeError("parallelizationFactor", 0, 1, 10)
		}
		mc.ParallelizationFactor = *s.ParallelizationFactor
	}
	if s.MaximumBatchingWindowInSeconds != nil {
		mc.MaximumBatchingWindow = time.Duration(*s.MaximumBatchingWindowInSeconds) * time.Second
	}
	if s.StartingPosition != nil {
		mc.StartingPosition = *s.StartingPosition
		if s.StartingPositionTimestamp == nil {
			mc.StartingPositionTimestamp = time.Time{}
		}
	}
	if s.StartingPositionTimestamp != nil {
		mc.StartingPositionTimestamp = *s.StartingPositionTimestamp
	}
	if s.Enabled != nil {
		mc.Disabled = !*s.Enabled
	}
	if s.BisectBatchOnFunctionError != nil {
		mc.BisectBatchOnFunctionError = *s.BisectBatchOnFunctionError
	}
	if s.MaximumRetryAttempts != nil {
		mc.MaximumRetryAttempts = new(*s.MaximumRetryAttempts)
	}
	if s.MaximumRecordAgeInSeconds != nil {
		mc.MaximumRecordAgeInSeconds = new(*s.MaximumRecordAgeInSeconds)
	}
	if s.TumblingWindowInSeconds != nil {
		mc.TumblingWindow = time.Duration(*s.TumblingWindowInSeconds) * time.Second
	}
	if s.FunctionResponseTypes != nil {
		for _, t := range *s.FunctionResponseTypes {
			if t != ReportBatchItemFailures {
				return &poller.ValidationError{Field: "FunctionResponseTypes", Message: "1 validation error detected: Value '[" + t +
					"]' at 'functionResponseTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [ReportBatchItemFailures]]"}
			}
		}
		mc.ReportBatchItemFailures = slices.Contains(*s.FunctionResponseTypes, ReportBatchItemFailures)
	}
	if s.OnFailureDestination != nil {
		mc.OnFailureDestination = *s.OnFailureDestination
	}
	if s.FilterPatterns != nil {
		mc.FilterPatterns = slices.Clone(*s.FilterPatterns)
	}
	return nil
}
