package esmapi

import (
	"context"
	"slices"

	"github.com/kinesis-esm/esm/poller"
)

// ListInput are ListEventSourceMappings' query parameters.
type ListInput struct {
	EventSourceArn, FunctionName, Marker string
	MaxItems                             int
}

// DefaultMaxItems is the page size when MaxItems is not given.
const DefaultMaxItems = 100

// List implements ListEventSourceMappings: mappings in creation order, a page at a time.
func (m *Manager) List(in ListInput) ([]EventSourceMapping, string, *APIError) {
	if in.MaxItems == 0 {
		in.MaxItems = DefaultMaxItems
	}
	if in.MaxItems < 1 || in.MaxItems > 10000 {
		return nil, "", fromConfig(poller.RangeError("maxItems", int64(in.MaxItems), 1, 10000))
	}
	var after cursor
	if in.Marker != "" {
		var err error
		if after, err = parseCursor(in.Marker); err != nil {
			return nil, "", invalidParameter("Invalid Marker: %s", in.Marker)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []*entry
	for _, e := range m.maps {
		if in.EventSourceArn != "" && e.rec.Mapping.EventSourceArn != in.EventSourceArn {
			continue
		}
		if in.FunctionName != "" {
			stream, _ := sourceStream(e.rec.Mapping.EventSourceArn)
			if parseFunctionName(in.FunctionName).arn(stream) != e.rec.Mapping.FunctionArn {
				continue
			}
		}
		if in.Marker != "" && !after.before(cursorOf(e)) {
			continue
		}
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *entry) int { return cursorOf(a).compare(cursorOf(b)) })
	next := ""
	if len(all) > in.MaxItems {
		all = all[:in.MaxItems]
		next = cursorOf(all[len(all)-1]).String()
	}
	out := make([]EventSourceMapping, 0, len(all))
	for _, e := range all {
		out = append(out, e.view())
	}
	return out, next, nil
}

// Tags returns the tags of the mapping with this ARN.
func (m *Manager) Tags(arn string) (map[string]string, *APIError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byARNLocked(arn)
	if e == nil {
		return nil, notFound()
	}
	if e.rec.Tags == nil {
		return map[string]string{}, nil
	}
	return e.rec.Tags, nil
}

// SetTags adds tags to (or, with remove, removes tag keys from) the mapping with this ARN.
func (m *Manager) SetTags(ctx context.Context, arn string, add map[string]string, remove []string) *APIError {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byARNLocked(arn)
	if e == nil {
		return notFound()
	}
	if e.state == StateDeleting {
		// A deleted mapping's record stays at its Deleting revision until it is removed.
		return inUse(e.rec.Mapping.UUID, e.state)
	}
	rec := e.rec
	tags := map[string]string{}
	for k, v := range rec.Tags {
		tags[k] = v
	}
	for k, v := range add {
		tags[k] = v
	}
	for _, k := range remove {
		delete(tags, k)
	}
	rec.Tags = tags
	rec.Revision++
	if err := m.catalog.Put(ctx, rec); err != nil {
		return m.lostLocked(ctx, rec.Mapping.UUID, err)
	}
	e.rec = rec
	return nil
}

func (m *Manager) byARNLocked(arn string) *entry {
	for _, e := range m.maps {
		if e.rec.Mapping.EventSourceMappingArn == arn {
			return e
		}
	}
	return nil
}
