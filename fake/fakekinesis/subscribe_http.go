package fakekinesis

import "net/http"

// ServeSubscribeToShard answers one SubscribeToShard HTTP request (the SDK's JSON body) as
// SubscribeClient's calls are answered: an AWS event stream in the response's Body, which ends
// when the subscription does or when Body is closed, or the JSON error Kinesis sends. It is for
// serving the fake over HTTP (a benchmark of the esm binary); the subscription's context is
// req's.
func (f *Fake) ServeSubscribeToShard(req *http.Request) *http.Response {
	resp, _ := f.serveSubscribe(req) // its error is always nil: failures are error responses
	return resp
}
