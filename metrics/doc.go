// Package metrics holds what esm's metric observers share: the names of Lambda's event source
// mapping metrics, and [Tee], which passes a mapping's measurements (a [poller.Observer]) to
// several observers at once.
//
// The observers are in its subpackages: metrics/prom keeps the measurements as Prometheus
// metrics (the package documents every metric and what it means in Lambda's terms),
// metrics/emf writes them as CloudWatch embedded-metric-format lines, and metrics/health serves
// the Prometheus metrics on /metrics next to the /healthz and /readyz probes.
package metrics
