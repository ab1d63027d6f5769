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
// Check also reports a member name repeated in one object (Problem.Duplicate), which jsonb accepts but keeps only
// the last value of, so that what was sent would not be what is stored; Go's decoder too silently keeps one. It
// reports a duplicate only when nothing in the document is refused.
//
// Check assumes syntactically valid JSON (json.Valid); on anything else it reports what it found first.
package jsonb

import (
	"bytes"
	"slices"
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
	// Duplicate marks a repeated member name, which jsonb stores (keeping the last) rather than refuses.
	Duplicate bool
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
	if s.problem != nil {
		return s.problem
	}
	return s.duplicate
}

// The scanner runs on every request body, so it allocates as little as it can: a path is kept as elements and
// spelled out only for a problem, values are checked without being copied, and the member names of the objects
// being scanned share one stack.
type scanner struct {
	in      []byte
	pos     int
	path    []pathElem
	problem *Problem
	// duplicate is the first repeated member name; scanning goes on, since a refused value matters more.
	duplicate *Problem
	// names holds the member names of the objects being scanned, innermost last.
	names []string
}

// pathElem is an object member's name or an array item's index.
type pathElem struct {
	key   string
	index int
	isKey bool
}

func (s *scanner) pathString() string {
	var b strings.Builder
	for i, e := range s.path {
		switch {
		case !e.isKey:
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		case i > 0:
			b.WriteString("." + e.key)
		default:
			b.WriteString(e.key)
		}
	}
	return b.String()
}

func (s *scanner) fail(reason string) {
	if s.problem == nil {
		s.problem = &Problem{Path: s.pathString(), Reason: reason}
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
		s.str(false)
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
	// Most objects have a handful of members: a scan of the stack beats a map until they have many.
	base := len(s.names)
	defer func() { s.names = s.names[:base] }()
	var nameSet map[string]bool
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
		key := s.str(true)
		s.skipSpace()
		if s.pos < len(s.in) && s.in[s.pos] == ':' {
			s.pos++
		}
		s.path = append(s.path, pathElem{key: key, isKey: true})
		if seen := nameSet[key] || (nameSet == nil && slices.Contains(s.names[base:], key)); seen && s.duplicate == nil {
			s.duplicate = &Problem{Path: s.pathString(), Duplicate: true,
				Reason: strconv.Quote(key) + " appears twice in one object: send each member once"}
		}
		if s.names = append(s.names, key); len(s.names)-base > 16 {
			if nameSet == nil {
				nameSet = make(map[string]bool, 2*(len(s.names)-base))
				for _, n := range s.names[base:] {
					nameSet[n] = true
				}
			}
			nameSet[key] = true
		}
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
		s.path = append(s.path, pathElem{index: i})
		s.value()
		s.path = s.path[:len(s.path)-1]
	}
}

// str scans a string and, when keep, returns it, unescaped only as far as naming a key and telling repeated names
// apart need (escapes other than \uXXXX are kept as written). A string without escapes is returned as one copy of
// its bytes; only one with escapes is rebuilt.
func (s *scanner) str(keep bool) string {
	s.pos++ // opening quote
	start := s.pos
	var b *strings.Builder
	for s.pos < len(s.in) {
		c := s.in[s.pos]
		switch {
		case c == '"':
			s.pos++
			switch {
			case !keep:
				return ""
			case b == nil:
				return string(s.in[start : s.pos-1])
			default:
				return b.String()
			}
		case c == '\\':
			if keep && b == nil {
				b = &strings.Builder{}
				b.Write(s.in[start:s.pos])
			}
			s.escape(b)
		case c < utf8.RuneSelf:
			if b != nil {
				b.WriteByte(c)
			}
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.in[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				s.fail("is not valid UTF-8")
				s.pos++
				continue
			}
			if b != nil {
				b.WriteRune(r)
			}
			s.pos += size
		}
	}
	if b != nil {
		return b.String()
	}
	return ""
}

// escape checks the escape at s.pos and, when b is not nil, writes what it stands for.
func (s *scanner) escape(b *strings.Builder) {
	if s.pos+1 >= len(s.in) {
		s.pos = len(s.in)
		return
	}
	if s.in[s.pos+1] != 'u' {
		if b != nil {
			b.Write(s.in[s.pos : s.pos+2])
		}
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
		if b != nil {
			b.WriteRune(0x10000 + (r-0xD800)<<10 + (low - 0xDC00))
		}
	case r >= 0xDC00 && r <= 0xDFFF:
		s.fail("contains an unpaired UTF-16 surrogate (\\u" + strconv.FormatInt(int64(r), 16) + ")")
	default:
		if b != nil {
			b.WriteRune(r)
		}
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
	trimmed := bytes.TrimLeft(intPart, "0")
	place := int64(len(trimmed))
	if place == 0 {
		fracLead := bytes.TrimLeft(frac, "0")
		if len(fracLead) == 0 {
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
