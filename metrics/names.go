package metrics

// Names of Lambda's metrics, kept by every observer (see the package documentation for their
// meaning; metrics/prom adds its own, prefixed esm_).
const (
	NamePolledEventCount                        = "PolledEventCount"
	NameFilteredOutEventCount                   = "FilteredOutEventCount"
	NameInvokedEventCount                       = "InvokedEventCount"
	NameFailedInvokeEventCount                  = "FailedInvokeEventCount"
	NameDroppedEventCount                       = "DroppedEventCount"
	NameOnFailureDestinationDeliveredEventCount = "OnFailureDestinationDeliveredEventCount"
	NameIteratorAge                             = "IteratorAge"
	NameInvocations                             = "Invocations"
	NameErrors                                  = "Errors"
	NameThrottles                               = "Throttles"
	NameDestinationDeliveryFailures             = "DestinationDeliveryFailures"
)
