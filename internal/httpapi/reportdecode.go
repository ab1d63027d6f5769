package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hyperfleet/hyperfleet/internal/jsonb"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// decodeReport reads a status report body. It is decodeStrict for reportBody, the API's hottest write, in one
// pass: a parser that knows reportBody's members matches their names exactly (case-sensitive, as exactMembers
// wants) while it decodes them, instead of encoding/json's decode (which matches names without regard to case)
// and then exactMembers' walk of the body again to check the names.
//
// The parser takes only what it is sure encoding/json takes the same way: exact member names, strings, integers,
// RFC 3339 times through time.Time's own UnmarshalJSON, and valid JSON kept raw for data and metadata. Anything
// else (an unknown or miscased name, a null where a value is expected, a number that is not an integer, text
// that is not JSON, a body jsonb refuses) goes to decodeStrict, so every refusal keeps its code and message,
// and the rare odd body it accepts (trailing "]") still decodes. FuzzDecodeReport holds the two to the same
// answers.
func decodeReport(r *http.Request, v *reportBody) error {
	if err := checkMediaType(r); err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeReportBytes(body, v)
}

// decodeReportBytes is decodeReport on a body already read.
func decodeReportBytes(body []byte, v *reportBody) error {
	p := reportParser{in: body}
	var out reportBody
	if p.report(&out) && jsonb.Check(body) == nil {
		*v = out
		return nil
	}
	return decodeStrictBytes(body, v)
}

// reportParser is a JSON parser for reportBody only. Each method returns false on anything it does not take,
// which sends the body to decodeStrict; it never reports an error of its own.
type reportParser struct {
	in  []byte
	pos int
}

func (p *reportParser) space() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// next skips white space and reports whether the next byte is c, consuming it if so.
func (p *reportParser) next(c byte) bool {
	p.space()
	if p.pos < len(p.in) && p.in[p.pos] == c {
		p.pos++
		return true
	}
	return false
}

func (p *reportParser) peek() byte {
	p.space()
	if p.pos < len(p.in) {
		return p.in[p.pos]
	}
	return 0
}

// members calls member for each member of the object at p.pos with its name (exactly as sent: a name with an
// escape is not taken).
func (p *reportParser) members(member func(name []byte) bool) bool {
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return true
	}
	for {
		p.space()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return false
		}
		start := p.pos + 1
		end := bytes.IndexByte(p.in[start:], '"')
		if end < 0 {
			return false
		}
		name := p.in[start : start+end]
		if bytes.IndexByte(name, '\\') >= 0 {
			return false
		}
		p.pos = start + end + 1
		if !p.next(':') || !member(name) {
			return false
		}
		if p.next(',') {
			continue
		}
		return p.next('}')
	}
}

func (p *reportParser) report(out *reportBody) bool {
	ok := p.members(func(name []byte) bool {
		switch string(name) {
		case "adapter":
			return p.str(&out.Adapter)
		case "observed_generation":
			return p.int(&out.ObservedGeneration)
		case "observed_time":
			p.space()
			start := p.pos
			if !p.str(nil) {
				return false
			}
			// What encoding/json does with a time.Time: hand it the value's text as sent.
			return out.ObservedTime.UnmarshalJSON(p.in[start:p.pos]) == nil
		case "conditions":
			return p.conditions(&out.Conditions)
		case "data":
			return p.raw(&out.Data)
		case "metadata":
			return p.raw(&out.Metadata)
		}
		return false
	})
	p.space()
	return ok && p.pos == len(p.in)
}

func (p *reportParser) conditions(out *[]reportedCondition) bool {
	if p.peek() == 'n' {
		if !bytes.HasPrefix(p.in[p.pos:], []byte("null")) {
			return false
		}
		p.pos += 4
		*out = nil
		return true
	}
	if !p.next('[') {
		return false
	}
	list := make([]reportedCondition, 0, 8)
	if p.next(']') {
		*out = list
		return true
	}
	for {
		var c reportedCondition
		ok := p.members(func(name []byte) bool {
			switch string(name) {
			case "type":
				return p.str(&c.Type)
			case "status":
				var s string
				ok := p.str(&s)
				c.Status = conditions.Status(s)
				return ok
			case "reason":
				return p.str(&c.Reason)
			case "message":
				return p.str(&c.Message)
			}
			return false
		})
		if !ok {
			return false
		}
		list = append(list, c)
		if p.next(',') {
			continue
		}
		if !p.next(']') {
			return false
		}
		*out = list
		return true
	}
}

// str reads a string. It takes valid UTF-8 and the escapes JSON has, except a \u escape of half a surrogate pair
// on its own (jsonb refuses that, so decodeStrict must answer).
func (p *reportParser) str(out *string) bool {
	if !p.next('"') {
		return false
	}
	start := p.pos // out may be nil: the string is only checked
	for i := start; i < len(p.in); i++ {
		switch c := p.in[i]; {
		case c == '"':
			if out != nil {
				*out = string(p.in[start:i])
			}
			p.pos = i + 1
			return true
		case c == '\\':
			return p.escaped(start, out)
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.in[i:])
			if r == utf8.RuneError && size <= 1 {
				return false
			}
			i += size - 1
		}
	}
	return false
}

// escaped finishes str for a string with escapes, from its first byte at start.
func (p *reportParser) escaped(start int, out *string) bool {
	b := make([]byte, 0, len(p.in)-start)
	for i := start; i < len(p.in); {
		c := p.in[i]
		switch {
		case c == '"':
			if out != nil {
				*out = string(b)
			}
			p.pos = i + 1
			return true
		case c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.in[i:])
			if r == utf8.RuneError && size <= 1 {
				return false
			}
			b = append(b, p.in[i:i+size]...)
			i += size
		case c != '\\':
			b = append(b, c)
			i++
		default:
			if i+1 >= len(p.in) {
				return false
			}
			switch e := p.in[i+1]; e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := hex4(p.in, i+2)
				if !ok {
					return false
				}
				i += 4
				if utf16.IsSurrogate(r) {
					// Only a pair: a lone half is what jsonb refuses.
					if i+7 >= len(p.in) || p.in[i+2] != '\\' || p.in[i+3] != 'u' {
						return false
					}
					r2, ok := hex4(p.in, i+4)
					if !ok {
						return false
					}
					if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
						return false
					}
					i += 6
				}
				if r == 0 {
					return false // jsonb refuses NUL
				}
				b = utf8.AppendRune(b, r)
			default:
				return false
			}
			i += 2
		}
	}
	return false
}

// hex4 reads the four hex digits of a \u escape at in[i:].
func hex4(in []byte, i int) (rune, bool) {
	if i+4 > len(in) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(in[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// int reads an integer that fits int64, spelled as JSON spells numbers (no fraction nor exponent: encoding/json
// refuses those for an integer field).
func (p *reportParser) int(out *int64) bool {
	p.space()
	start := p.pos
	if p.pos < len(p.in) && p.in[p.pos] == '-' {
		p.pos++
	}
	digits := p.pos
	for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == digits || (p.in[digits] == '0' && p.pos-digits > 1) {
		return false
	}
	if p.pos < len(p.in) && (p.in[p.pos] == '.' || p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		return false
	}
	n, err := strconv.ParseInt(string(p.in[start:p.pos]), 10, 64)
	*out = n
	return err == nil
}

// raw reads any JSON value and keeps its text, as json.RawMessage does.
func (p *reportParser) raw(out *json.RawMessage) bool {
	p.space()
	start := p.pos
	if !p.skip(0) {
		return false
	}
	*out = bytes.Clone(p.in[start:p.pos])
	return true
}

// maxRawDepth bounds the nesting skip follows; encoding/json's own limit is 10000, and a body that deep goes to it.
const maxRawDepth = 1000

// skip passes over one JSON value, checking its syntax.
func (p *reportParser) skip(depth int) bool {
	if depth > maxRawDepth {
		return false
	}
	switch p.peek() {
	case '{':
		p.pos++
		if p.next('}') {
			return true
		}
		for {
			if !p.str(nil) || !p.next(':') || !p.skip(depth+1) {
				return false
			}
			if p.next(',') {
				continue
			}
			return p.next('}')
		}
	case '[':
		p.pos++
		if p.next(']') {
			return true
		}
		for {
			if !p.skip(depth + 1) {
				return false
			}
			if p.next(',') {
				continue
			}
			return p.next(']')
		}
	case '"':
		return p.str(nil)
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	default:
		return p.number()
	}
}

func (p *reportParser) literal(word string) bool {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(word)) {
		return false
	}
	p.pos += len(word)
	return true
}

// number passes over a JSON number (RFC 8259's grammar).
func (p *reportParser) number() bool {
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.in) && p.in[p.pos] == '-' {
		p.pos++
	}
	start := p.pos
	if n := digits(); n == 0 || (n > 1 && p.in[start] == '0') {
		return false
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return false
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
