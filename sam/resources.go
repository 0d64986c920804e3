package sam

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Resource types whose names and ARNs esm resolves.
const (
	typeServerlessFunction = "AWS::Serverless::Function"
	typeLambdaFunction     = "AWS::Lambda::Function"
	typeEventSourceMapping = "AWS::Lambda::EventSourceMapping"
	typeKinesisStream      = "AWS::Kinesis::Stream"
	typeStreamConsumer     = "AWS::Kinesis::StreamConsumer"
	typeDynamoDBTable      = "AWS::DynamoDB::Table"
	typeSQSQueue           = "AWS::SQS::Queue"
	typeSNSTopic           = "AWS::SNS::Topic"
	typeS3Bucket           = "AWS::S3::Bucket"
	typeIAMRole            = "AWS::IAM::Role"
	typeKMSKey             = "AWS::KMS::Key"
	typeKMSAlias           = "AWS::KMS::Alias"
)

// nameProperty is the property that holds a resource's physical name, by type.
var nameProperty = map[string]string{
	typeServerlessFunction: "FunctionName",
	typeLambdaFunction:     "FunctionName",
	typeKinesisStream:      "Name",
	typeStreamConsumer:     "ConsumerName",
	typeDynamoDBTable:      "TableName",
	typeSQSQueue:           "QueueName",
	typeSNSTopic:           "TopicName",
	typeS3Bucket:           "BucketName",
	typeIAMRole:            "RoleName",
	typeKMSAlias:           "AliasName",
}

func (r *resolver) resourceType(id string) string {
	t := r.resources[id].get("Type")
	if t == nil || t.kind != kindScalar {
		return ""
	}
	return t.str
}

func (r *resolver) property(id, prop string) *node {
	return r.resources[id].get("Properties").get(prop)
}

// physicalName is the resource's name: the name property when the template sets it, otherwise the
// logical ID (CloudFormation would add the stack name and a random suffix; esm keeps names stable).
func (r *resolver) physicalName(at *node, path, id string) (string, error) {
	if v, ok := r.names[id]; ok {
		return v, nil
	}
	ok, err := r.exists(id)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", r.errAt(at, path, "resource %s is not created: its Condition is false", id)
	}
	if r.nameBusy[id] {
		return "", r.errAt(at, path, "the name of resource %s depends on itself", id)
	}
	r.nameBusy[id] = true
	defer delete(r.nameBusy, id)

	typ := r.resourceType(id)
	name := id
	if prop, ok := nameProperty[typ]; ok {
		if pn := r.property(id, prop); pn != nil {
			v, err := r.resolve(pn, "Resources."+id+".Properties."+prop)
			if err != nil {
				return "", err
			}
			if v != noValue && v != nil {
				s, ok := str(v)
				if !ok {
					return "", r.errAt(pn, "Resources."+id+".Properties."+prop, "%s must be a string, not %s", prop, describe(v))
				}
				name = s
			}
		}
	}
	switch typ {
	case typeS3Bucket:
		if r.property(id, "BucketName") == nil {
			name = strings.ToLower(name)
		}
	case typeSQSQueue, typeSNSTopic:
		fifoProp := map[string]string{typeSQSQueue: "FifoQueue", typeSNSTopic: "FifoTopic"}[typ]
		if f := r.property(id, fifoProp); f != nil && r.property(id, nameProperty[typ]) == nil {
			v, err := r.resolve(f, "Resources."+id+".Properties."+fifoProp)
			if err != nil {
				return "", err
			}
			if s, _ := str(v); strings.EqualFold(s, "true") {
				name += ".fifo"
			}
		}
	}
	r.names[id] = name
	return name, nil
}

func (r *resolver) arn(service, region, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", r.opts.partition, service, region, r.opts.accountID, resource)
}

// queueURL is the URL of a queue of this account, on the endpoint in use.
func (r *resolver) queueURL(name string) string {
	if r.opts.endpointURL != "" {
		return strings.TrimRight(r.opts.endpointURL, "/") + "/" + r.opts.accountID + "/" + url.PathEscape(name)
	}
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", r.opts.region, r.opts.urlSuffix(), r.opts.accountID, url.PathEscape(name))
}

// resourceRef is what Ref returns for a resource.
func (r *resolver) resourceRef(at *node, path, id string) (any, error) {
	typ := r.resourceType(id)
	switch typ {
	case typeSQSQueue:
		name, err := r.physicalName(at, path, id)
		if err != nil {
			return nil, err
		}
		return r.queueURL(name), nil
	case typeSNSTopic:
		return r.getAtt(at, path, id, "TopicArn")
	case typeStreamConsumer:
		return r.getAtt(at, path, id, "ConsumerARN")
	}
	return r.physicalName(at, path, id)
}

// attributes lists the attributes esm resolves, by type, for error messages.
var attributes = map[string][]string{
	typeServerlessFunction: {"Arn"},
	typeLambdaFunction:     {"Arn"},
	typeKinesisStream:      {"Arn"},
	typeStreamConsumer:     {"ConsumerARN", "ConsumerName", "StreamARN"},
	typeDynamoDBTable:      {"Arn", "StreamArn"},
	typeSQSQueue:           {"Arn", "QueueName", "QueueUrl"},
	typeSNSTopic:           {"TopicArn", "TopicName"},
	typeS3Bucket:           {"Arn", "DomainName"},
	typeIAMRole:            {"Arn"},
	typeKMSKey:             {"Arn", "KeyId"},
}

func (r *resolver) getAtt(at *node, path, id, attr string) (any, error) {
	if _, ok := r.resources[id]; !ok {
		if owner, ok := r.implicitRoleOwner(id); ok && attr == "Arn" {
			name, err := r.roleName(at, path, owner)
			if err != nil {
				return nil, err
			}
			return fmt.Sprintf("arn:%s:iam::%s:role/%s", r.opts.partition, r.opts.accountID, name), nil
		}
		return nil, r.errAt(at, path, "Fn::GetAtt %s.%s: no resource %q in the template", id, attr, id)
	}
	typ := r.resourceType(id)
	name := func() (string, error) { return r.physicalName(at, path, id) }
	switch typ + "." + attr {
	case typeServerlessFunction + ".Arn", typeLambdaFunction + ".Arn":
		n, err := name()
		return r.arn("lambda", r.opts.region, "function:"+n), err
	case typeKinesisStream + ".Arn":
		n, err := name()
		return r.arn("kinesis", r.opts.region, "stream/"+n), err
	case typeStreamConsumer + ".ConsumerName":
		return name()
	case typeStreamConsumer + ".StreamARN", typeStreamConsumer + ".ConsumerARN":
		sn := r.property(id, "StreamARN")
		if sn == nil {
			return nil, r.errAt(at, path, "resource %s has no StreamARN", id)
		}
		stream, err := r.evalString(sn, "Resources."+id+".Properties.StreamARN", 0, "StreamARN")
		if err != nil || attr == "StreamARN" {
			return stream, err
		}
		n, err := name()
		return stream + "/consumer/" + n + ":0", err
	case typeDynamoDBTable + ".Arn", typeDynamoDBTable + ".StreamArn":
		return r.tableARN(at, path, id, attr)
	case typeSQSQueue + ".Arn":
		n, err := name()
		return r.arn("sqs", r.opts.region, n), err
	case typeSQSQueue + ".QueueName":
		return name()
	case typeSQSQueue + ".QueueUrl":
		n, err := name()
		return r.queueURL(n), err
	case typeSNSTopic + ".TopicArn":
		n, err := name()
		return r.arn("sns", r.opts.region, n), err
	case typeSNSTopic + ".TopicName":
		return name()
	case typeS3Bucket + ".Arn":
		n, err := name()
		return fmt.Sprintf("arn:%s:s3:::%s", r.opts.partition, n), err
	case typeS3Bucket + ".DomainName":
		n, err := name()
		return n + ".s3." + r.opts.urlSuffix(), err
	case typeIAMRole + ".Arn":
		n, err := name()
		if err != nil {
			return nil, err
		}
		rolePath := "/"
		if pn := r.property(id, "Path"); pn != nil {
			if rolePath, err = r.evalString(pn, "Resources."+id+".Properties.Path", 0, "Path"); err != nil {
				return nil, err
			}
		}
		return fmt.Sprintf("arn:%s:iam::%s:role%s%s", r.opts.partition, r.opts.accountID, rolePath, n), nil
	case typeKMSKey + ".KeyId":
		return id, nil
	case typeKMSKey + ".Arn":
		return r.arn("kms", r.opts.region, "key/"+id), nil
	}
	known := attributes[typ]
	if len(known) == 0 {
		return nil, r.errAt(at, path, "Fn::GetAtt %s.%s: esm cannot resolve attributes of %s resources; use a parameter and %s instead", id, attr, cmp.Or(typ, "untyped"), r.opts.name(InputParameterOverrides))
	}
	return nil, r.errAt(at, path, "Fn::GetAtt %s.%s: %s resources have the attributes %s", id, attr, typ, strings.Join(known, ", "))
}

// implicitRoleOwner reports whether id is the execution role SAM creates for a function without a
// Role property: <FunctionLogicalId>Role.
func (r *resolver) implicitRoleOwner(id string) (string, bool) {
	fn, ok := strings.CutSuffix(id, "Role")
	if !ok || r.resourceType(fn) != typeServerlessFunction {
		return "", false
	}
	if r.property(fn, "Role") != nil {
		return "", false
	}
	return fn, true
}

// roleName is the physical name of the role SAM generates for function fn.
func (r *resolver) roleName(at *node, path, fn string) (string, error) {
	if ok, err := r.exists(fn); err != nil || !ok {
		if err == nil {
			err = r.errAt(at, path, "resource %s is not created: its Condition is false", fn)
		}
		return "", err
	}
	return fn + "Role", nil
}

// logicalIDs returns the IDs of the resources of one of the given types, sorted.
func (r *resolver) logicalIDs(types ...string) []string {
	var ids []string
	for id := range r.resources {
		if slices.Contains(types, r.resourceType(id)) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
