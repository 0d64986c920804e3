package live

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// ShardTable is how state.json carries a mapping's shards: the column names once, then one row
// per shard, its values in the columns' order (null where a shard has none, trailing nulls left
// out). The names are ShardView's JSON names; a reader ignores a column it does not know. Keys
// repeated on every shard were half of the document: 1,000 shards as objects were 268 KB.
type ShardTable struct {
	Columns []string            `json:"columns"`
	Rows    [][]json.RawMessage `json:"rows"`
}

// shardColumns are the columns in the order state.json writes them, each with its field.
var shardColumns = []struct {
	name  string
	field func(*ShardView) any // a pointer to the field
}{
	{"shardId", func(s *ShardView) any { return &s.ShardID }},
	{"parents", func(s *ShardView) any { return &s.Parents }},
	{"state", func(s *ShardView) any { return &s.State }},
	{"owner", func(s *ShardView) any { return &s.Owner }},
	{"checkpoint", func(s *ShardView) any { return &s.Checkpoint }},
	{"checkpointAt", func(s *ShardView) any { return &s.CheckpointAt }},
	{"iteratorAgeMillis", func(s *ShardView) any { return &s.IteratorAgeMillis }},
	{"blockedSince", func(s *ShardView) any { return &s.BlockedSince }},
	{"attempts", func(s *ShardView) any { return &s.Attempts }},
	{"retryingFirst", func(s *ShardView) any { return &s.RetryingFirst }},
	{"retryingLast", func(s *ShardView) any { return &s.RetryingLast }},
	{"lastError", func(s *ShardView) any { return &s.LastError }},
	{"lastErrorAt", func(s *ShardView) any { return &s.LastErrorAt }},
	{"delivered", func(s *ShardView) any { return &s.Delivered }},
	{"dropped", func(s *ShardView) any { return &s.Dropped }},
	{"unreachable", func(s *ShardView) any { return &s.Unreachable }},
	{"lastSkip", func(s *ShardView) any { return &s.LastSkip }},
	{"skipPending", func(s *ShardView) any { return &s.SkipPending }},
}

var null = json.RawMessage("null")

// tableOf is shards as a ShardTable.
func tableOf(shards []ShardView) (ShardTable, error) {
	t := ShardTable{Columns: make([]string, len(shardColumns)), Rows: make([][]json.RawMessage, 0, len(shards))}
	for i, c := range shardColumns {
		t.Columns[i] = c.name
	}
	for i := range shards {
		row := make([]json.RawMessage, len(shardColumns))
		last := -1
		for j, c := range shardColumns {
			p := c.field(&shards[i])
			if reflect.ValueOf(p).Elem().IsZero() {
				row[j] = null
				continue
			}
			v, err := json.Marshal(p)
			if err != nil {
				return ShardTable{}, fmt.Errorf("shard %s, %s: %w", shards[i].ShardID, c.name, err)
			}
			row[j], last = v, j
		}
		t.Rows = append(t.Rows, row[:last+1])
	}
	return t, nil
}

// shards are t's rows as ShardViews.
func (t ShardTable) shards() ([]ShardView, error) {
	fields := make([]int, len(t.Columns)) // each column's index in shardColumns; -1 when unknown
	for i, name := range t.Columns {
		fields[i] = -1
		for j, c := range shardColumns {
			if c.name == name {
				fields[i] = j
			}
		}
	}
	out := make([]ShardView, len(t.Rows))
	for r, row := range t.Rows {
		if len(row) > len(fields) {
			return nil, fmt.Errorf("shard row %d has %d values for %d columns", r, len(row), len(fields))
		}
		for i, v := range row {
			if fields[i] < 0 || bytes.Equal(v, null) {
				continue
			}
			if err := json.Unmarshal(v, shardColumns[fields[i]].field(&out[r])); err != nil {
				return nil, fmt.Errorf("shard row %d, %s: %w", r, t.Columns[i], err)
			}
		}
	}
	return out, nil
}

// mappingJSON is MappingView without its JSON methods.
type mappingJSON MappingView

// MarshalJSON writes the shards as a ShardTable.
func (v MappingView) MarshalJSON() ([]byte, error) {
	t, err := tableOf(v.Shards)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		mappingJSON
		Shards ShardTable `json:"shards"`
	}{mappingJSON(v), t})
}

// UnmarshalJSON reads the shards as a ShardTable, or as a list of objects (an esm from before
// the table).
func (v *MappingView) UnmarshalJSON(b []byte) error {
	var in struct {
		*mappingJSON
		Shards json.RawMessage `json:"shards"`
	}
	in.mappingJSON = (*mappingJSON)(v)
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	v.Shards = nil
	switch raw := bytes.TrimSpace(in.Shards); {
	case len(raw) == 0 || bytes.Equal(raw, null):
		return nil
	case raw[0] == '[':
		return json.Unmarshal(raw, &v.Shards)
	default:
		var t ShardTable
		if err := json.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("shards: %w", err)
		}
		s, err := t.shards()
		v.Shards = s
		return err
	}
}
