// Package jsonb tells whether JSON text is something PostgreSQL's jsonb type stores. Go's encoding/json accepts
// text that jsonb refuses, and a value that reached the database only to be refused there would be a server error
// (SQLSTATE 22P05, 22021 or 22003) for what is bad input. The API checks every request body here first and answers
// 400 naming the field.
//
// jsonb refuses, and Check reports:
//   - the NUL character (\u0000) in a string or a key;
//   - a \u escape of a UTF-16 surrogate that is not half of a pair;
//   - bytes that are not valid UTF-8 (overlong forms and encoded surrogates included);
//   - a number beyond the numeric type's range: more than 131072 digits before the decimal point or more than
//     16383 after it (1e131072, 1e-16384, 0.<16384 digits>).
//
// Check assumes syntactically valid JSON (json.Valid); on anything else it reports what it found first.
package jsonb

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of PostgreSQL's numeric type, which jsonb numbers are.
const (
	MaxDigitsBeforePoint = 131072
	MaxDigitsAfterPoint  = 16383
)

// Problem is the first value Check found that jsonb refuses.
type Problem struct {
	// Path is the value's place, in the API's field notation: object keys joined by '.', array items as "[i]"
	// ("data.items[2].name"); empty for the document itself.
	Path   string
	Reason string
}

func (p *Problem) Error() string {
	if p.Path == "" {
		return p.Reason
	}
	return p.Path + ": " + p.Reason
}

// Check returns the first value of raw that jsonb refuses, or nil.
func Check(raw []byte) *Problem {
	s := scanner{in: raw}
	s.value()
	return s.problem
}

type scanner struct {
	in      []byte
	pos     int
	path    []string
	problem *Problem
}

func (s *scanner) fail(reason string) {
	if s.problem == nil {
		s.problem = &Problem{Path: strings.Join(s.path, ""), Reason: reason}
	}
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value() {
	s.skipSpace()
	if s.pos >= len(s.in) || s.problem != nil {
		return
	}
	switch c := s.in[s.pos]; {
	case c == '{':
		s.object()
	case c == '[':
		s.array()
	case c == '"':
		s.str()
	case c == '-' || (c >= '0' && c <= '9'):
		s.number()
	default: // true, false, null
		for s.pos < len(s.in) && s.in[s.pos] >= 'a' && s.in[s.pos] <= 'z' {
			s.pos++
		}
	}
}

func (s *scanner) object() {
	s.pos++ // {
	for s.problem == nil {
		s.skipSpace()
		if s.pos >= len(s.in) {
			return
		}
		if s.in[s.pos] == '}' {
			s.pos++
			return
		}
		if s.in[s.pos] == ',' {
			s.pos++
			continue
		}
		key := s.str()
		s.skipSpace()
		if s.pos < len(s.in) && s.in[s.pos] == ':' {
			s.pos++
		}
		segment := key
		if len(s.path) > 0 {
			segment = "." + key
		}
		s.path = append(s.path, segment)
		s.value()
		s.path = s.path[:len(s.path)-1]
	}
}

func (s *scanner) array() {
	s.pos++ // [
	for i := 0; s.problem == nil; {
		s.skipSpace()
		if s.pos >= len(s.in) {
			return
		}
		if s.in[s.pos] == ']' {
			s.pos++
			return
		}
		if s.in[s.pos] == ',' {
			s.pos++
			i++
			continue
		}
		s.path = append(s.path, "["+strconv.Itoa(i)+"]")
		s.value()
		s.path = s.path[:len(s.path)-1]
	}
}

// str scans a string and returns it, unescaped only as far as naming a key needs (escapes other than \uXXXX are
// kept as written; the path is for people).
func (s *scanner) str() string {
	s.pos++ // opening quote
	var b strings.Builder
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			s.pos++
			return b.String()
		case c == '\\':
			s.escape(&b)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.in[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				s.fail("is not valid UTF-8")
				s.pos++
				continue
			}
			b.WriteRune(r)
			s.pos += size
		}
	}
	return b.String()
}

func (s *scanner) escape(b *strings.Builder) {
	if s.pos+1 >= len(s.in) {
		s.pos = len(s.in)
		return
	}
	if s.in[s.pos+1] != 'u' {
		b.Write(s.in[s.pos : s.pos+2])
		s.pos += 2
		return
	}
	r, ok := s.hex4(s.pos + 2)
	s.pos += 6
	switch {
	case !ok:
		s.fail("has a malformed \\u escape")
	case r == 0:
		s.fail("contains the NUL character (\\u0000), which cannot be stored")
	case r >= 0xD800 && r <= 0xDBFF:
		low, ok := rune(0), false
		if s.pos+1 < len(s.in) && s.in[s.pos] == '\\' && s.in[s.pos+1] == 'u' {
			low, ok = s.hex4(s.pos + 2)
		}
		if !ok || low < 0xDC00 || low > 0xDFFF {
			s.fail("contains an unpaired UTF-16 surrogate (\\u" + strconv.FormatInt(int64(r), 16) + ")")
			return
		}
		s.pos += 6
		b.WriteRune(0x10000 + (r-0xD800)<<10 + (low - 0xDC00))
	case r >= 0xDC00 && r <= 0xDFFF:
		s.fail("contains an unpaired UTF-16 surrogate (\\u" + strconv.FormatInt(int64(r), 16) + ")")
	default:
		b.WriteRune(r)
	}
}

func (s *scanner) hex4(at int) (rune, bool) {
	if at+4 > len(s.in) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.in[at:at+4]), 16, 16)
	return rune(v), err == nil //nolint:gosec // four hex digits fit a rune
}

// number checks a number literal against numeric's range: its most significant digit at most MaxDigitsBeforePoint
// places before the decimal point, and at most MaxDigitsAfterPoint digits after it (trailing zeros count: numeric
// keeps the scale written).
func (s *scanner) number() {
	start := s.pos
	if s.in[s.pos] == '-' {
		s.pos++
	}
	intStart := s.pos
	for s.pos < len(s.in) && isDigit(s.in[s.pos]) {
		s.pos++
	}
	intPart := s.in[intStart:s.pos]
	var frac []byte
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		fracStart := s.pos
		for s.pos < len(s.in) && isDigit(s.in[s.pos]) {
			s.pos++
		}
		frac = s.in[fracStart:s.pos]
	}
	exponent := int64(0)
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		s.pos++
		expStart := s.pos
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		for s.pos < len(s.in) && isDigit(s.in[s.pos]) {
			s.pos++
		}
		var err error
		if exponent, err = strconv.ParseInt(string(s.in[expStart:s.pos]), 10, 32); err != nil {
			s.fail("is a number beyond the range that can be stored: " + literal(s.in[start:s.pos]))
			return
		}
	}
	scale := int64(len(frac)) - exponent
	if scale > MaxDigitsAfterPoint {
		s.fail("is a number with more than 16383 digits after the decimal point: " + literal(s.in[start:s.pos]))
		return
	}
	// The place of the most significant digit, counted before the decimal point (negative after it).
	trimmed := strings.TrimLeft(string(intPart), "0")
	place := int64(len(trimmed))
	if place == 0 {
		fracLead := strings.TrimLeft(string(frac), "0")
		if fracLead == "" {
			return // zero
		}
		place = -int64(len(frac) - len(fracLead))
	}
	if place+exponent > MaxDigitsBeforePoint {
		s.fail("is a number with more than 131072 digits before the decimal point: " + literal(s.in[start:s.pos]))
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// literal shortens a number literal for a message.
func literal(b []byte) string {
	if len(b) <= 32 {
		return string(b)
	}
	return string(b[:16]) + "…" + string(b[len(b)-8:]) + " (" + strconv.Itoa(len(b)) + " characters)"
}
