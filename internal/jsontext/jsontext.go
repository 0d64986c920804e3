// Package jsontext writes strings into JSON as encoding/json does, without reflection: the events
// esm builds byte by byte (the engine's, the Kinesis source's) escape their strings with it, so
// that the bytes match what a Go Lambda runtime's encoding/json produces.
package jsontext

import (
	"strings"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json escapes it (including its
// HTML-safe escapes of <, > and &), so the bytes match what a Go Lambda runtime produces.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendChars(b, s)
	return append(b, '"')
}

// AppendChars appends s escaped for use inside a JSON string, without the quotes.
func AppendChars(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// Decoded is s as encoding/json decodes it from what AppendChars writes for it: itself, but for
// each byte that is not valid UTF-8, which is written (and so decoded) as U+FFFD.
func Decoded(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
