package runner

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/kinesis-esm/esm/invoke"
	"github.com/kinesis-esm/esm/poller"
	"github.com/kinesis-esm/esm/sam"
)

// DefaultTemplate is the template read when Template.Path is empty.
const DefaultTemplate = "template.yaml"

// EmulatorAccountID is the account local emulators put in their ARNs (kinesis-local, goaws): a
// template's AWS::AccountId when Template.EndpointURL is set.
const EmulatorAccountID = "000000000000"

// ErrNoTemplate is wrapped by Template.Mapping's error when there is no template to take the
// mapping from: the default template does not exist and no stream is given, or a mapping of a
// template is selected (Template.Function) without one.
var ErrNoTemplate = errors.New("no template")

// Template names a SAM or CloudFormation template, the mapping of it to run and what overrides
// the template's stream and function name. Without a template (Path empty and no template.yaml),
// Stream alone makes the mapping, with Lambda's defaults.
type Template struct {
	// Path is the template. Default DefaultTemplate, which may be missing when Stream is set.
	Path string
	// Function selects the mapping when the template has several: a function's logical ID or
	// name, <function>/<event>, or an AWS::Lambda::EventSourceMapping's logical ID.
	Function string
	// ParameterOverrides are the template's parameters (AWS::Region, AWS::AccountId and the other
	// pseudo parameters too).
	ParameterOverrides map[string]string
	// EndpointURL is the emulator every AWS call goes to (the endpoint given to AWSConfig), ""
	// for AWS itself. With one, the template's AWS::AccountId is EmulatorAccountID.
	EndpointURL string
	// LookupAccount finds AWS::AccountId with STS GetCallerIdentity on AWS itself (no EndpointURL)
	// when the template names it and ParameterOverrides does not; otherwise it is sam local's
	// 123456789012 (sam.DefaultAccountID).
	LookupAccount bool
	// InputNames are the caller's names of its inputs in messages (a command's flags; see
	// sam.WithInputNames).
	InputNames map[sam.Input]string
	// Stream, when set, is the stream (a name or an ARN) read instead of the template's.
	Stream *string
	// FunctionName, when set, names the function in ARNs and the state key instead of the
	// template's (default without a template: DefaultFunctionName).
	FunctionName *string
}

// Load reads the template cfg's region resolves, with the emulators' account when EndpointURL is
// set. A template error is reported before any AWS call; the only call is STS's, with
// LookupAccount. A missing default template is not an error: Load then returns nil. Errors about
// the template wrap poller.ErrInvalidConfig.
func (t Template) Load(ctx context.Context, cfg aws.Config) (*sam.Template, error) {
	path := cmp.Or(t.Path, DefaultTemplate)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) && t.Path == "" {
			return nil, nil
		}
		return nil, &poller.ValidationError{Field: "Template", Message: fmt.Sprintf("template %s: %v", path, err), Err: err}
	}
	opts := []sam.Option{sam.WithParameterOverrides(t.ParameterOverrides), sam.WithRegion(cfg.Region), sam.WithEndpointURL(t.EndpointURL), sam.WithInputNames(t.InputNames)}
	if t.EndpointURL != "" {
		opts = append(opts, sam.WithAccountID(EmulatorAccountID))
	}
	// The template is checked first, with sam local's account: a wrong template is reported as
	// such, before any AWS call.
	tpl, err := sam.Load(path, opts...)
	if err != nil {
		return nil, err
	}
	if _, given := t.ParameterOverrides["AWS::AccountId"]; given || t.EndpointURL != "" || !t.LookupAccount || !mentionsAccountID(path) {
		return tpl, nil
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		input := cmp.Or(t.InputNames[sam.InputParameterOverrides], sam.InputParameterOverrides.String())
		return nil, fmt.Errorf("find the AWS account for AWS::AccountId (or pass %s AWS::AccountId=...): %w", input, err)
	}
	return sam.Load(path, append(opts, sam.WithAccountID(aws.ToString(out.Account)))...)
}

// mentionsAccountID reports whether the template names the AWS::AccountId pseudo parameter at all
// (a Ref, or ${AWS::AccountId} in a Sub): only then is the caller's account worth an STS call.
func mentionsAccountID(path string) bool {
	raw, err := os.ReadFile(path)
	return err != nil || bytes.Contains(raw, []byte("AWS::AccountId"))
}

// TemplateMapping is what Template.Mapping finds: the mapping to run and the template's mapping
// it came from.
type TemplateMapping struct {
	// Mapping is the mapping as Run takes it: its Source, its Function's name and timeout, and
	// Lambda's settings in Config. Its function's Invoker or Handler, its Store and its Hooks are
	// the caller's to fill.
	Mapping Mapping
	// Template is the template's mapping (its function's environment and its metrics
	// configuration); nil without a template. A Go handler run in this process reads its
	// environment from the process's: the program sets the function's Environment there, this
	// package does not.
	Template *sam.Mapping
	// Warnings are the template's: mappings esm skipped.
	Warnings []string
}

// Mapping loads the template (Load) and resolves the mapping it selects into a Mapping, with Stream
// and FunctionName overriding the template's. Without a template it is Stream's mapping with
// Lambda's defaults (TRIM_HORIZON, the function's default name and a 3 s timeout); without a
// template and a stream it is an error that wraps ErrNoTemplate and poller.ErrInvalidConfig.
func (t Template) Mapping(ctx context.Context, cfg aws.Config) (*TemplateMapping, error) {
	tpl, err := t.Load(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res := &TemplateMapping{Mapping: Mapping{
		Function: Function{Name: DefaultFunctionName, Timeout: invoke.DefaultTimeout},
		Config:   poller.Config{StartingPosition: poller.TrimHorizon},
	}}
	m := &res.Mapping
	switch {
	case tpl != nil:
		tm, err := tpl.Select(t.Function)
		if err != nil {
			if len(tpl.Warnings) > 0 {
				return nil, fmt.Errorf("%w (%s)", err, strings.Join(tpl.Warnings, "; "))
			}
			return nil, err
		}
		res.Template, res.Warnings = tm, tpl.Warnings
		m.Config = tm.PollerConfig()
		m.Source = TemplateSource(tm)
		m.Function.Role = tm.Function.Role
		m.Function.Name, m.Function.ARN = tm.Function.FunctionName, tm.Function.FunctionArn
		m.Function.Timeout = time.Duration(tm.Function.Timeout) * time.Second
		m.Function.ReservedConcurrency = tm.Function.ReservedConcurrentExecutions
	case t.Stream == nil:
		return nil, &poller.ValidationError{Field: "Template", Message: fmt.Sprintf("%s does not exist: give a template, or a stream to run without one", cmp.Or(t.Path, DefaultTemplate)), Err: ErrNoTemplate}
	case t.Function != "":
		return nil, &poller.ValidationError{Field: "Template", Message: fmt.Sprintf("function %s selects a mapping of a template, and there is none", t.Function), Err: ErrNoTemplate}
	}
	if t.Stream != nil {
		m.Source.Stream, m.Source.Consumer = *t.Stream, ""
	}
	if t.FunctionName != nil {
		m.Function.Name, m.Function.ARN = *t.FunctionName, ""
	}
	return res, nil
}

// TemplateSource is the source of a template's mapping as Run looks it up. Its stream is the
// stream's name when the template derived the ARN from this account (the endpoint's own ARN then
// wins), the ARN itself when the template gave another account's stream. Its consumer, when the
// mapping reads through one, is its name when the template declares it (its creation time, in the
// ARN, is known only once registered), else its ARN.
func TemplateSource(m *sam.Mapping) Source {
	src := Source{Stream: m.EventSourceArn}
	if m.Stream.LogicalID != "" {
		src.Stream = m.Stream.Name
	}
	switch {
	case m.Consumer == nil:
	case m.Consumer.LogicalID != "":
		src.Consumer = m.Consumer.Name
	default:
		src.Consumer = m.Consumer.Arn
	}
	return src
}
