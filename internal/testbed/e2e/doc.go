// Package e2e holds library-level tests that run whole mappings against the local emulators
// (kinesis-local); see the _test.go files. It has no non-test code.
package e2e
