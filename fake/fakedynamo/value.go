package fakedynamo

import (
	"bytes"
	"math/big"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// lookup follows a document path; nil when any step is missing.
func lookup(item map[string]types.AttributeValue, pa path) types.AttributeValue {
	if item == nil || len(pa) == 0 {
		return nil
	}
	var cur types.AttributeValue = &types.AttributeValueMemberM{Value: item}
	for _, e := range pa {
		switch c := cur.(type) {
		case *types.AttributeValueMemberM:
			if e.name == "" {
				return nil
			}
			v, ok := c.Value[e.name]
			if !ok {
				return nil
			}
			cur = v
		case *types.AttributeValueMemberL:
			if e.name != "" || e.index >= len(c.Value) {
				return nil
			}
			cur = c.Value[e.index]
		default:
			return nil
		}
	}
	return cur
}

// setPath sets the element a path names. Its parent must exist (DynamoDB does not create
// intermediate maps); a list index past the end appends.
func setPath(item map[string]types.AttributeValue, pa path, v types.AttributeValue) error {
	if len(pa) == 1 {
		item[pa[0].name] = v
		return nil
	}
	parent := lookup(item, pa[:len(pa)-1])
	last := pa[len(pa)-1]
	switch p := parent.(type) {
	case *types.AttributeValueMemberM:
		if last.name == "" {
			break
		}
		p.Value[last.name] = v
		return nil
	case *types.AttributeValueMemberL:
		if last.name != "" {
			break
		}
		if last.index >= len(p.Value) {
			p.Value = append(p.Value, v)
		} else {
			p.Value[last.index] = v
		}
		return nil
	}
	return validation("The document path provided in the update expression is invalid for update")
}

// setPathCreate is setPath creating missing maps (for projections).
func setPathCreate(item map[string]types.AttributeValue, pa path, v types.AttributeValue) error {
	m := item
	for i, e := range pa[:len(pa)-1] {
		if e.name == "" {
			continue
		}
		next, ok := m[e.name].(*types.AttributeValueMemberM)
		if !ok {
			next = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}
			m[e.name] = next
		}
		_ = i
		m = next.Value
	}
	last := pa[len(pa)-1]
	if last.name != "" {
		m[last.name] = v
	}
	return nil
}

func removePath(item map[string]types.AttributeValue, pa path) {
	if len(pa) == 1 {
		delete(item, pa[0].name)
		return
	}
	parent := lookup(item, pa[:len(pa)-1])
	last := pa[len(pa)-1]
	switch p := parent.(type) {
	case *types.AttributeValueMemberM:
		delete(p.Value, last.name)
	case *types.AttributeValueMemberL:
		if last.name == "" && last.index < len(p.Value) {
			p.Value = slices.Delete(p.Value, last.index, last.index+1)
		}
	}
}

func typeName(v types.AttributeValue) string {
	switch v.(type) {
	case *types.AttributeValueMemberS:
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		return "B"
	case *types.AttributeValueMemberBOOL:
		return "BOOL"
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberSS:
		return "SS"
	case *types.AttributeValueMemberNS:
		return "NS"
	case *types.AttributeValueMemberBS:
		return "BS"
	case *types.AttributeValueMemberL:
		return "L"
	case *types.AttributeValueMemberM:
		return "M"
	}
	return "?"
}

func numEqual(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

// equal is DynamoDB's = on two values: same type and value (sets regardless of order).
func equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		return ok && numEqual(a.Value, b.Value)
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, numEqual)
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, bytes.Equal)
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		return ok && slices.EqualFunc(a.Value, b.Value, equal)
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			w, ok := b.Value[k]
			if !ok || !equal(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

func sameSet[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y T) bool { return eq(x, y) }) {
			return false
		}
	}
	return true
}

// compare orders two scalars of the same type (S, N, B); ok is false otherwise.
func compare(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		if !ok {
			return 0, false
		}
		return strings.Compare(a.Value, b.Value), true
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		x, ok1 := new(big.Rat).SetString(a.Value)
		y, ok2 := new(big.Rat).SetString(b.Value)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		if !ok {
			return 0, false
		}
		return bytes.Compare(a.Value, b.Value), true
	}
	return 0, false
}

// cloneValue deep-copies a value, so that callers never share memory with the table.
func cloneValue(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBS:
		out := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			out[i] = slices.Clone(b)
		}
		return &types.AttributeValueMemberBS{Value: out}
	case *types.AttributeValueMemberL:
		out := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			out[i] = cloneValue(e)
		}
		return &types.AttributeValueMemberL{Value: out}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: cloneItem(v.Value)}
	}
	return v
}

func cloneItem(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = cloneValue(v)
	}
	return out
}

// ItemSize is an item's size as DynamoDB bills it: the UTF-8 bytes of every attribute name plus
// the size of its value. Strings and binaries count their bytes; numbers about one byte per two
// significant digits plus one; booleans and nulls one byte; lists and maps three bytes plus one
// per element plus their elements (and, for maps, the element names); sets the sum of their
// elements.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numSize: significant digits / 2 rounded up, plus one byte.
func numSize(s string) int {
	s = strings.TrimLeft(s, "-+")
	s = strings.Replace(s, ".", "", 1)
	s = strings.TrimLeft(s, "0")
	s = strings.TrimRight(s, "0")
	if s == "" {
		return 1
	}
	return (len(s)+1)/2 + 1
}

// validKeyValue: a key attribute must be a non-empty S or B, or an N.
func keyType(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if v.Value == "" {
			return ""
		}
		return "S"
	case *types.AttributeValueMemberN:
		return "N"
	case *types.AttributeValueMemberB:
		if len(v.Value) == 0 {
			return ""
		}
		return "B"
	}
	return ""
}

// keyString is a stable string form of a key value (for maps and ordering).
func keyString(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S" + v.Value
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	case *types.AttributeValueMemberB:
		return "B" + string(v.Value)
	}
	return ""
}
