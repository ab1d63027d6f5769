package supervisor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// ANSI colours: one per component in turn, and for levels and the supervisor's own messages.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiGrey   = "\x1b[90m"
)

// selfName prefixes the supervisor's own messages.
const selfName = "hyperfleet-dev"

// console serialises whole lines from every component onto one writer.
type console struct {
	mu    sync.Mutex
	w     io.Writer
	color bool
	raw   bool
	width int // of the name column
}

func newConsole(w io.Writer, color, raw bool) *console {
	return &console{w: w, color: color, raw: raw, width: len(selfName)}
}

// colorOf returns the colour of component i, or "" without colours.
func (c *console) colorOf(i int) string {
	if !c.color {
		return ""
	}
	palette := [...]string{"\x1b[36m", "\x1b[32m", "\x1b[35m", "\x1b[34m", "\x1b[96m", "\x1b[92m", "\x1b[95m", "\x1b[94m"}
	return palette[i%len(palette)]
}

func (c *console) paint(code, s string) string {
	if !c.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

func (c *console) prefix(name, color string) string {
	return c.paint(color, fmt.Sprintf("%-*s", c.width, name)) + " │ "
}

func (c *console) write(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.w, s) //nolint:errcheck // best effort: a closed terminal must not stop the components
}

// notice writes a message of the supervisor's own.
func (c *console) notice(msg string) {
	c.write(c.prefix(selfName, ansiBold) + c.paint(ansiBold, msg) + "\n")
}

// warning writes a message of the supervisor's own that asks for attention.
func (c *console) warning(msg string) {
	c.write(c.prefix(selfName, ansiBold) + c.paint(ansiYellow, msg) + "\n")
}

// plain writes text as it is.
func (c *console) plain(text string) {
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	c.write(text)
}

// line writes one line of a component's output: JSON log lines rendered as "time LEVEL message key=value…",
// anything else as it came.
func (c *console) line(name, color string, raw []byte) {
	text := string(raw)
	if !c.raw {
		if rendered, level, ok := renderJSON(raw); ok {
			text = rendered
			switch level {
			case "WARN":
				text = c.paint(ansiYellow, text)
			case "ERROR":
				text = c.paint(ansiRed, text)
			case "DEBUG":
				text = c.paint(ansiGrey, text)
			}
		}
	}
	c.write(c.prefix(name, color) + text + "\n")
}

// Warnf writes a supervisor message that asks for attention (a component died, is unhealthy, is slow).
func (s *Supervisor) Warnf(format string, args ...any) {
	s.console.warning(fmt.Sprintf(format, args...))
}

// maxLine caps a buffered partial line; longer lines are cut into pieces.
const maxLine = 64 << 10

// lineWriter is a component's stdout and stderr: it keeps every byte in the component's log file and hands whole
// lines to the console.
type lineWriter struct {
	name    string
	color   string
	console *console
	file    *os.File
	quiet   func([]byte) bool

	mu  sync.Mutex
	buf []byte
}

// Write never fails: a full disk must not stop a component, and the console is best effort.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.file != nil {
		_, _ = w.file.Write(p) //nolint:errcheck // a full disk must not stop a component; the console still shows the line
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.show(bytes.TrimRight(w.buf[:i], "\r"))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLine {
		w.show(w.buf)
		w.buf = nil
	}
	if len(w.buf) == 0 {
		w.buf = nil // let a large buffer go
	}
	return len(p), nil
}

// flush hands a last unterminated line to the console.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.show(w.buf)
		w.buf = nil
	}
}

func (w *lineWriter) show(line []byte) {
	if w.quiet != nil && w.quiet(line) {
		return
	}
	w.console.line(w.name, w.color, line)
}

// renderJSON renders a slog JSON line as "15:04:05.000 LEVEL message key=value …", keeping the attributes in
// their order. It reports false for anything that is not a JSON object.
func renderJSON(line []byte) (text, level string, ok bool) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return "", "", false
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", "", false
	}
	var stamp, msg string
	var attrs []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", "", false
		}
		key, isKey := tok.(string)
		var value json.RawMessage
		if !isKey || dec.Decode(&value) != nil {
			return "", "", false
		}
		var str string
		isString := json.Unmarshal(value, &str) == nil
		switch {
		case key == "time" && isString:
			if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
				stamp = t.Local().Format("15:04:05.000")
				continue
			}
		case key == "level" && isString:
			level = strings.ToUpper(str)
			continue
		case key == "msg" && isString:
			msg = str
			continue
		}
		attrs = append(attrs, key+"="+attrValue(value, str, isString))
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		return "", "", false
	}
	parts := make([]string, 0, 3+len(attrs))
	if stamp != "" {
		parts = append(parts, stamp)
	}
	if level != "" {
		parts = append(parts, fmt.Sprintf("%-5s", level))
	}
	if msg != "" {
		parts = append(parts, msg)
	}
	return strings.Join(append(parts, attrs...), " "), level, true
}

// attrValue writes a string bare unless quoting is needed to read it back, and anything else as compact JSON.
func attrValue(value json.RawMessage, str string, isString bool) string {
	if isString {
		if str == "" || strings.ContainsAny(str, " \t\n\"=") {
			return fmt.Sprintf("%q", str)
		}
		return str
	}
	var compact bytes.Buffer
	if json.Compact(&compact, value) != nil {
		return string(value)
	}
	return compact.String()
}
