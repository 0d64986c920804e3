package esmapi_test

import (
	"context"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/aws"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/kinesis-esm/esm/esmapi"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/runner"
)

// A Manager answers Lambda's event source mapping API, as AWS does: here, a list of no mappings
// and the error for a UUID it does not know. The mappings live in a directory, as with esm serve
// --state-dir.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "esm-serve-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	progress := esmapi.ProgressFuncs{ // esm serve keeps it in checkpoint.FileStore or lease.Dynamo
		StoreFunc:  func(context.Context, string) (poller.Store, error) { return poller.NewMemoryStore(), nil },
		DeleteFunc: func(context.Context, string) error { return nil },
	}
	r, err := runner.New(aws.Config{Region: "us-east-1"}) // esm serve's loads the SDK's configuration (runner.AWSConfig)
	if err != nil {
		log.Fatal(err)
	}
	m, err := esmapi.Open(context.Background(), r, esmapi.FileCatalog{Dir: dir + "/mappings"}, progress)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	for _, path := range []string{"/2015-03-31/event-source-mappings/", "/2015-03-31/event-source-mappings/not-a-mapping"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status := fmt.Sprint(resp.StatusCode)
		if errType := resp.Header.Get("X-Amzn-ErrorType"); errType != "" {
			status += " " + errType
		}
		fmt.Println(status, strings.TrimSpace(string(body)))
	}
	// Output:
	// 200 {"EventSourceMappings":[]}
	// 404 ResourceNotFoundException {"Message":"The resource you requested does not exist.","Type":"User"}
}
