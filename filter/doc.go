// Package filter implements the FilterCriteria of a Kinesis event source mapping: the event
// pattern language Lambda shares with EventBridge, applied to one Kinesis record at a time.
//
// The poller compiles a mapping's patterns once with [Compile] and calls [Filters.Match] for each
// record it reads. A record that matches none of the patterns is dropped: it is not delivered,
// not retried and not sent to a destination, and the checkpoint moves past it. Records that match
// are delivered unchanged. This package only decides; what happens to dropped records is the
// poller's business.
//
// # Sources
//
// Each rule below says where it comes from:
//
//   - [DOC]: Lambda's current documentation (the event filtering pages, the API reference).
//   - [OLD DOC]: Lambda's documentation before its 2023 rewrite.
//   - [EB-DOC]: EventBridge's documentation of the pattern language, which Lambda's documentation
//     says it shares.
//   - [ENGINE]: the behaviour of aws/event-ruler, the open-source matcher behind EventBridge,
//     where no AWS document says. That Lambda runs the same engine is likely, not documented.
//   - UNCONFIRMED: our own choice where neither documents nor engine settle it; each is a
//     recommendation to verify against AWS.
//
// # What a pattern is matched against
//
// A pattern is matched against the record's "kinesis" object as it appears in the Lambda event,
// with data decoded: the top-level keys a pattern may name are
//
//	data                         the record's payload, parsed as JSON
//	partitionKey                 string
//	sequenceNumber               string
//	kinesisSchemaVersion         string, always "1.0"
//	approximateArrivalTimestamp  number of epoch seconds, as the event renders it
//
// Matching data this way is [DOC]. Lambda's current documentation says Kinesis mappings "only
// support filtering on the data key"; older documentation showed a top-level "partitionKey" rule
// [OLD DOC]. We support the four metadata keys of that model (UNCONFIRMED: whether AWS still
// matches them, rejects them, or never matches them; the spec's alternative, accepting them but
// never matching, is a small change in field.matchTop). Any other top-level key is treated as absent from every
// record, so only exists:false can satisfy it (UNCONFIRMED).
//
// A DynamoDB stream's record is matched with [Filters.MatchDocument], against its whole record
// object in the Lambda event: the keys a pattern names are the event record's ("eventName",
// "dynamodb" with its typed "Keys", "NewImage" and "OldImage", "awsRegion", …), attribute values
// as the event types them ({"S": "x"}, {"N": "101"}: a number attribute is a string there, so
// it is matched by exact or prefix rules, not numeric ones; UNCONFIRMED). Lambda's documentation
// says DynamoDB mappings "only support filtering on the dynamodb key"; AWS's recorded tests also
// filter on "eventName", and those filters work [AWS-REC], so both are accepted.
//
// If a pattern has a "data" rule and the record's data is not one valid JSON value, the data rule
// fails, so the pattern does not match and the record is dropped [OLD DOC]. A pattern without a
// "data" rule never looks at the data, so any payload passes it on its other keys [OLD DOC]. A "data" rule
// inside a top-level "$or" branch only fails that branch (UNCONFIRMED). Data nested deeper than
// encoding/json allows (10000 levels) counts as not JSON (UNCONFIRMED).
//
// # Matching rules
//
//   - The patterns of one FilterCriteria are OR-ed: a record passes if any matches [DOC].
//   - Within a pattern, every key named must match (AND); keys the pattern does not name are
//     ignored [DOC]. A key's array of rule values matches if any one of them matches (OR) [DOC].
//   - "$or": [ {...}, {...} ] at any object level matches if any branch matches; each branch is
//     matched against the same event object as the keys beside it [DOC; EB-DOC for nesting].
//   - A nested pattern object matches the event object at that key [DOC]. If the event value is an
//     array, the pattern object matches if any object in the array matches it (at any depth of
//     nested arrays), so the keys of one match come from one element [ENGINE]. If the event value
//     is not an object, or the key is missing, the pattern object is matched as against an object
//     with no keys (UNCONFIRMED beyond [ENGINE]'s exists:false examples).
//   - A rule value matches a leaf of the event: a string, number, boolean or null. If the event
//     value is an array, the rule matches if it matches any element (arrays nested in arrays are
//     flattened) [EB-DOC]. An object-valued key has no leaves, so no rule value but exists:false
//     matches it [ENGINE].
//   - Strings match exactly, byte for byte, with no case folding or normalisation [OLD DOC].
//   - Numbers in exact rules ("k": [300]) match by their JSON text: 300, 300.0 and 3.0e2 are all
//     different [OLD DOC]. (Newer aws/event-ruler versions also compare them numerically; we follow
//     the documentation.)
//   - null: [null] matches a present JSON null, never a missing key [DOC]. Empty string: [""]
//     matches a present "" [DOC]. Booleans: [true] matches JSON true, not the string "true".
//   - {"prefix": s} and {"suffix": s} match strings that begin or end with s [DOC]. {"prefix": {"equals-ignore-case": s}} and the suffix form do so ignoring
//     case [EB-DOC; UNCONFIRMED for Lambda]. They never match numbers, booleans or null.
//   - {"equals-ignore-case": s} matches strings equal to s under Unicode simple case folding
//     [DOC]. (The engine's folding is Java's; the two differ only on rare characters.)
//   - {"numeric": [...]} matches JSON numbers only, never numeric-looking strings, compared as
//     numbers to six decimal places, and only within [-5e9, 5e9]: an event number outside that
//     range matches no numeric rule [EB-DOC]. We round both sides to micro-units; the engine
//     truncates (UNCONFIRMED, differs only past the sixth decimal).
//   - {"exists": true} matches if the key has at least one leaf: present, and not an object, an
//     empty array or an array of only objects [DOC for present leaves; ENGINE for the rest].
//     {"exists": false} matches exactly when exists:true would not: a missing key, an object, an
//     empty array [ENGINE]. A present null exists [ENGINE].
//   - {"anything-but": x} matches any leaf that is not excluded, whatever its type: anything-but
//     "a" matches 5, true and null [ENGINE]. x may be a string, a number, or an array of only
//     strings or only numbers [DOC: a list of strings; EB-DOC: the other forms]; numbers are excluded by
//     numeric value, not by text [ENGINE]. On an array, anything-but matches if any element is not
//     excluded [ENGINE]. It never matches a missing key or an object.
//   - {"anything-but": {"prefix": s}}, {"anything-but": {"suffix": s}} and
//     {"anything-but": {"equals-ignore-case": s or [s, ...]}} exclude strings with that prefix,
//     suffix or case-folded value [EB-DOC; UNCONFIRMED for Lambda, where we accept them because
//     the engine does].
//
// # Invalid patterns
//
// Compile rejects a pattern with Lambda's "Invalid filter pattern definition." when:
//
//   - it is longer than 4096 characters (Unicode code points; AWS may count UTF-16 units) [DOC];
//   - it is not one valid JSON value [OLD DOC; the message is AWS-validated], or the value is not
//     an object [ENGINE]. An empty
//     Pattern string is therefore invalid (UNCONFIRMED);
//   - any object in it is empty, including the whole pattern {} [ENGINE];
//   - a key's value is neither an object nor an array [ENGINE];
//   - the top-level "data" key is an array rather than an object: Lambda refuses a non-JSON data
//     pattern for Kinesis at create and update (our reading of [OLD DOC]'s "non-JSON" data
//     pattern; UNCONFIRMED);
//   - a rule array is empty, or holds an array [ENGINE];
//   - an operator object has other than exactly one key, or names an operator we do not support
//     [ENGINE]. Supported: prefix, suffix, equals-ignore-case, numeric, exists, anything-but.
//     Rejected although EventBridge has them: wildcard, cidr, exactly (UNCONFIRMED for Lambda;
//     its documentation lists none of them);
//   - exists is not a boolean; prefix or suffix is not a string or {"equals-ignore-case": string};
//     equals-ignore-case is not a string [ENGINE];
//   - numeric is not ["=", n], ["<" or "<=", n], [">" or ">=", n] or
//     [">" or ">=", n, "<" or "<=", m] with n < m, or a number in it is outside [-5e9, 5e9]
//     [ENGINE; EB-DOC for the range];
//   - anything-but is a boolean, null, an empty array, an array mixing types or holding anything
//     but strings and numbers, a number outside [-5e9, 5e9], an empty prefix or suffix, or an
//     operator object other than those above [ENGINE]; an empty equals-ignore-case array
//     (UNCONFIRMED: the engine accepts it as matching everything);
//   - "$or" is not an array of at least two objects, or a key inside a "$or" branch (at any
//     depth) is an operator name such as "prefix" or "numeric" [ENGINE].
//
// There is no nesting-depth limit of its own: AWS documents none, and the 4096-character cap
// already keeps a pattern under about 2048 levels (UNCONFIRMED). Compile never expands "$or",
// so matching time stays linear in the pattern's size times the record's.
//
// If a JSON object repeats a key, the last occurrence wins, in patterns [OLD DOC] and in record
// data alike (UNCONFIRMED for data); the earlier occurrences in a pattern are not even validated
// (UNCONFIRMED).
package filter
