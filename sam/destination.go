package sam

import (
	"cmp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws/arn"
)

// destinationTypes are the values of SAM's DestinationConfig.OnFailure.Type.
var destinationTypes = []string{"SQS", "SNS", "S3", "Kafka"}

// destinationConfig reads DestinationConfig: an on-failure destination (an SQS queue, an SNS topic
// or an S3 bucket; SAM's Type too for a SAM event), with the queue's URL or the bucket's name.
func (p propReader) destinationConfig(kind mappingKind) (DestinationConfig, error) {
	var dc DestinationConfig
	n := p.props.get("DestinationConfig")
	if n == nil {
		return dc, nil
	}
	m, ok, err := p.mapping("DestinationConfig", "DestinationConfig must be {OnFailure: {Destination: <ARN>}}, not %s")
	if err != nil || !ok {
		return dc, err
	}
	for k := range m {
		switch k {
		case "OnFailure":
		case "OnSuccess":
			return dc, p.fail("DestinationConfig", nil, "Unsupported DestinationConfig parameter for given event source mapping type.")
		default:
			return dc, p.fail("DestinationConfig", nil, "Encountered unsupported property DestinationConfig.%s: the only property is OnFailure", k)
		}
	}
	of, ok := m["OnFailure"].(map[string]any)
	if !ok {
		if m["OnFailure"] == nil {
			return dc, nil
		}
		return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure must be {Destination: <ARN>}, not %s", describe(m["OnFailure"]))
	}
	for k := range of {
		if k != "Destination" && !(kind.destinationType && k == "Type") {
			return dc, p.fail("DestinationConfig", nil, "Encountered unsupported property DestinationConfig.OnFailure.%s", k)
		}
	}
	if t, present := of["Type"]; present {
		if tn := n.get("OnFailure").get("Type"); tn != nil && tn.kind == kindFn {
			return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure.Type must be written out (SQS, SNS, S3 or Kafka): SAM does not resolve intrinsic functions there")
		}
		ts, _ := str(t)
		if !slices.Contains(destinationTypes, ts) {
			return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure.Type %s: The only valid values for 'Type' are 'SQS', 'SNS', 'S3', and 'Kafka'", describe(t))
		}
		dc.OnFailure.Type = ts
	}
	if d, present := of["Destination"]; present && d != nil {
		ds, ok := str(d)
		if !ok {
			return dc, p.fail("DestinationConfig", nil, "DestinationConfig.OnFailure.Destination must be an ARN, not %s", describe(d))
		}
		if len(ds) > 350 {
			return dc, p.fail("DestinationConfig", nil, "1 validation error detected: Value '%s' at 'destinationConfig.onFailure.destination' failed to satisfy constraint: Member must have length less than or equal to 350", ds)
		}
		dc.OnFailure.Destination = ds
	}
	p.r.describeDestination(&dc.OnFailure)
	return dc, nil
}

// describeDestination derives what the ARN of an on-failure destination says: its Type, when SAM's
// is not given, and the queue's URL or the bucket's name.
func (r *resolver) describeDestination(of *OnFailure) {
	a, err := arn.Parse(of.Destination)
	if err != nil {
		return
	}
	switch a.Service {
	case "sqs":
		of.Type = cmp.Or(of.Type, "SQS")
		o := r.opts
		o.region, o.accountID = a.Region, a.AccountID
		of.QueueUrl = (&resolver{opts: o}).queueURL(a.Resource)
	case "sns":
		of.Type = cmp.Or(of.Type, "SNS")
	case "s3":
		of.Type = cmp.Or(of.Type, "S3")
		of.Bucket = a.Resource
	}
}
