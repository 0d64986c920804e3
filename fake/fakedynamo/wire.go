package fakedynamo

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/aws/smithy-go"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go/middleware"
)

// The wire codec turns the SDK's input and output structs into the JSON of DynamoDB's JSON 1.0
// protocol and back, by reflection: members by their Go names (which are the wire names),
// timestamps as epoch seconds, blobs as base64, attribute values as their one-key unions
// ({"S":"x"}). Outputs leave out nil members and the SDK's result metadata.

var (
	timeType     = reflect.TypeFor[time.Time]()
	bytesType    = reflect.TypeFor[[]byte]()
	metadataType = reflect.TypeFor[middleware.Metadata]()
	avType       = reflect.TypeFor[types.AttributeValue]()
	avPkg        = reflect.TypeFor[types.AttributeValueMemberS]().PkgPath()
	streamAVPkg  = reflect.TypeFor[streamtypes.AttributeValueMemberS]().PkgPath()
	recordType   = reflect.TypeFor[streamtypes.Record]()
)

// maxDepth bounds the nesting of a decoded request (DynamoDB allows 32 levels in an item).
const maxDepth = 64

// decodeWire parses body into a new *I.
func decodeWire[I any](body []byte) (*I, error) {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("body has data after its JSON value")
	}
	in := new(I)
	if raw == nil {
		return in, nil
	}
	if err := decodeValue(raw, reflect.ValueOf(in).Elem(), 0); err != nil {
		return nil, err
	}
	return in, nil
}

func decodeValue(raw any, v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d levels", maxDepth)
	}
	if raw == nil {
		return nil // null: the member stays absent
	}
	t := v.Type()
	switch {
	case t == avType:
		av, err := decodeAV(raw, depth)
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(av))
		return nil
	case t == timeType:
		n, ok := raw.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
			return fmt.Errorf("a timestamp must be epoch seconds, not %v", raw)
		}
		sec, frac := math.Modf(f)
		v.Set(reflect.ValueOf(time.Unix(int64(sec), int64(math.Round(frac*1e3))*1e6).UTC()))
		return nil
	case t == bytesType:
		s, ok := raw.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if !ok || err != nil {
			return fmt.Errorf("a blob must be base64")
		}
		v.SetBytes(b)
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := decodeValue(raw, p.Elem(), depth+1); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Struct:
		return decodeStruct(raw, v, depth)
	case reflect.Slice:
		list, ok := raw.([]any)
		if !ok {
			return fmt.Errorf("expected a list for %s", t)
		}
		s := reflect.MakeSlice(t, len(list), len(list))
		for i, e := range list {
			if err := decodeValue(e, s.Index(i), depth+1); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Map:
		obj, ok := raw.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			return fmt.Errorf("expected a map for %s", t)
		}
		m := reflect.MakeMapWithSize(t, len(obj))
		for k, e := range obj {
			ev := reflect.New(t.Elem()).Elem()
			if err := decodeValue(e, ev, depth+1); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		v.Set(m)
	default:
		return decodeScalar(raw, v)
	}
	return nil
}

func decodeStruct(raw any, v reflect.Value, depth int) error {
	obj, ok := raw.(map[string]any)
	if !ok {
		return fmt.Errorf("expected an object for %s", v.Type())
	}
	for k, e := range obj {
		f, ok := v.Type().FieldByName(goName(v.Type(), k))
		if !ok || !f.IsExported() || f.Type == metadataType {
			continue // unknown members are ignored, as DynamoDB does
		}
		if err := decodeValue(e, v.FieldByIndex(f.Index), depth+1); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func decodeScalar(raw any, v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		s, ok := raw.(string)
		if !ok {
			return fmt.Errorf("expected a string")
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := raw.(bool)
		if !ok {
			return fmt.Errorf("expected a boolean")
		}
		v.SetBool(b)
	case reflect.Int32, reflect.Int64, reflect.Int:
		n, ok := raw.(json.Number)
		i, err := strconv.ParseInt(string(n), 10, v.Type().Bits())
		if !ok || err != nil {
			return fmt.Errorf("expected an integer, not %v", raw)
		}
		v.SetInt(i)
	case reflect.Float64:
		n, ok := raw.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil {
			return fmt.Errorf("expected a number, not %v", raw)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("cannot decode %s", v.Type())
	}
	return nil
}

// decodeAV parses an attribute value: an object with exactly one member naming its type.
func decodeAV(raw any, depth int) (types.AttributeValue, error) {
	obj, ok := raw.(map[string]any)
	if !ok || len(obj) != 1 {
		return nil, fmt.Errorf("Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes")
	}
	for typ, e := range obj {
		return decodeAVMember(typ, e, depth)
	}
	return nil, nil
}

func decodeAVMember(typ string, e any, depth int) (types.AttributeValue, error) {
	strs := func() ([]string, error) {
		var out []string
		return out, decodeValue(e, reflect.ValueOf(&out).Elem(), depth+1)
	}
	switch typ {
	case "S", "N":
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%s must be a string", typ)
		}
		if typ == "S" {
			return &types.AttributeValueMemberS{Value: s}, nil
		}
		return &types.AttributeValueMemberN{Value: s}, checkNumber(s)
	case "B":
		var b []byte
		err := decodeValue(e, reflect.ValueOf(&b).Elem(), depth+1)
		return &types.AttributeValueMemberB{Value: b}, err
	case "BOOL", "NULL":
		b, ok := e.(bool)
		if !ok {
			return nil, fmt.Errorf("%s must be a boolean", typ)
		}
		if typ == "BOOL" {
			return &types.AttributeValueMemberBOOL{Value: b}, nil
		}
		return &types.AttributeValueMemberNULL{Value: b}, nil
	case "SS", "NS":
		ss, err := strs()
		if typ == "SS" || err != nil {
			return &types.AttributeValueMemberSS{Value: ss}, err
		}
		for _, n := range ss {
			if err := checkNumber(n); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberNS{Value: ss}, nil
	case "BS":
		var bs [][]byte
		err := decodeValue(e, reflect.ValueOf(&bs).Elem(), depth+1)
		return &types.AttributeValueMemberBS{Value: bs}, err
	case "L":
		var l []types.AttributeValue
		err := decodeValue(e, reflect.ValueOf(&l).Elem(), depth+1)
		return &types.AttributeValueMemberL{Value: l}, err
	case "M":
		var m map[string]types.AttributeValue
		err := decodeValue(e, reflect.ValueOf(&m).Elem(), depth+1)
		return &types.AttributeValueMemberM{Value: m}, err
	}
	return nil, fmt.Errorf("unknown AttributeValue type %q", typ)
}

// numberForm is a DynamoDB number: a decimal with an optional exponent.
var numberForm = regexp.MustCompile(`^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,9})?$`)

// checkNumber refuses what DynamoDB refuses in a number: anything that is not a decimal, more
// than 38 significant digits, a magnitude above 9.99…E+125 or below 1E-130 (zero aside). The
// fake computes with numbers exactly, so an exponent of a billion would stall it.
func checkNumber(s string) error {
	m := numberForm.FindStringSubmatch(s)
	if m == nil {
		return &smithy.GenericAPIError{Code: "ValidationException", Message: "The parameter cannot be converted to a numeric value: " + s, Fault: smithy.FaultClient}
	}
	exp := 0
	if m[2] != "" {
		exp, _ = strconv.Atoi(m[2][1:])
	}
	intPart, frac, _ := strings.Cut(m[1], ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return nil // zero
	}
	// The value is 0.digits × 10^mag.
	mag := exp + len(intPart) - (len(intPart+frac) - len(digits))
	digits = strings.TrimRight(digits, "0")
	switch {
	case len(digits) > 38:
		return &smithy.GenericAPIError{Code: "ValidationException", Message: "Attempting to store more than 38 significant digits in a Number", Fault: smithy.FaultClient}
	case mag > 126:
		return &smithy.GenericAPIError{Code: "ValidationException", Message: "Number overflow. Attempting to store a number with magnitude larger than supported range", Fault: smithy.FaultClient}
	case mag < -129:
		return &smithy.GenericAPIError{Code: "ValidationException", Message: "Number underflow. Attempting to store a number with magnitude smaller than supported range", Fault: smithy.FaultClient}
	}
	return nil
}

// encodeWire renders v (an output or error struct, or a pointer to one) as the protocol's JSON
// tree. Members named in skip are left out.
func encodeWire(v reflect.Value, skip ...string) any {
	switch {
	case !v.IsValid():
		return nil
	case v.Type() == timeType:
		t := v.Interface().(time.Time)
		return json.Number(strconv.FormatFloat(float64(t.UnixMilli())/1e3, 'f', -1, 64))
	case v.Type() == bytesType:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		if av, ok := encodeAV(v.Interface()); ok {
			return av
		}
		return encodeWire(v.Elem(), skip...)
	case reflect.Struct:
		obj := map[string]any{}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Type == metadataType || isSkipped(f.Name, skip) {
				continue
			}
			fv := v.Field(i)
			if (fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Interface || fv.Kind() == reflect.Map || fv.Kind() == reflect.Slice) && fv.IsNil() {
				continue
			}
			if fv.Kind() == reflect.String && fv.String() == "" {
				continue // an enum left unset
			}
			obj[wireName(v.Type(), f.Name)] = encodeWire(fv)
		}
		return obj
	case reflect.Slice:
		out := make([]any, v.Len())
		for i := range out {
			out[i] = encodeWire(v.Index(i))
		}
		return out
	case reflect.Map:
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[it.Key().String()] = encodeWire(it.Value())
		}
		return out
	case reflect.String:
		return v.String()
	}
	return v.Interface()
}

// wireName is the protocol's name of a struct's member: its Go name, except in a stream
// record, whose members start in lower case (awsRegion, dynamodb, eventID, …).
func wireName(t reflect.Type, field string) string {
	if t == recordType {
		return strings.ToLower(field[:1]) + field[1:]
	}
	return field
}

// goName is the Go name of a member named on the wire.
func goName(t reflect.Type, member string) string {
	if t == recordType && member != "" {
		return strings.ToUpper(member[:1]) + member[1:]
	}
	return member
}

func isSkipped(name string, skip []string) bool {
	for _, s := range skip {
		if s == name {
			return true
		}
	}
	return false
}

// encodeAV renders an attribute value of either API (their member types are alike:
// AttributeValueMemberX with a Value) as its one-key union {"X": value}.
func encodeAV(x any) (any, bool) {
	t := reflect.TypeOf(x)
	if t.Kind() != reflect.Pointer || (t.Elem().PkgPath() != avPkg && t.Elem().PkgPath() != streamAVPkg) {
		return nil, false
	}
	name, ok := strings.CutPrefix(t.Elem().Name(), "AttributeValueMember")
	if !ok {
		return nil, false
	}
	return map[string]any{name: encodeWire(reflect.ValueOf(x).Elem().FieldByName("Value"))}, true
}
