package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

// rawLabels returns r's labels as JSON: as stored when the read kept them so, else encoded.
func rawLabels(r *resource.Resource) (json.RawMessage, error) {
	if r.RawLabels != nil {
		return r.RawLabels, nil
	}
	labels := r.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	raw, err := json.Marshal(labels)
	if err != nil {
		return nil, fmt.Errorf("encode the labels of %s %s: %w", r.Kind, r.ID, err)
	}
	return raw, nil
}

// appendResource appends r as the list's items show it to a caller who sees every field, the same document
// present and encoding/json produce, written directly: the stored JSON (labels, spec, conditions) goes through
// as PostgreSQL handed it over, where encoding/json would scan and compact each of them again, which was most of
// a list's cost (BenchmarkEncodeListPage). PostgreSQL only ever hands over valid JSON for jsonb columns, so the
// copy only drops the blanks its text form puts after ':' and ','.
func (k *kindHandler) appendResource(buf []byte, r *resource.Resource) ([]byte, error) {
	labels, err := rawLabels(r)
	if err != nil {
		return nil, err
	}
	conds := r.Status.RawConditions
	if conds == nil {
		list := r.Status.Conditions
		if list == nil {
			list = []conditions.Condition{}
		}
		if conds, err = json.Marshal(list); err != nil {
			return nil, fmt.Errorf("encode the conditions of %s %s: %w", r.Kind, r.ID, err)
		}
	}
	buf = append(buf, `{"id":`...)
	buf = appendString(buf, r.ID)
	buf = append(buf, `,"kind":`...)
	buf = appendString(buf, r.Kind)
	buf = append(buf, `,"name":`...)
	buf = appendString(buf, r.Name)
	buf = append(buf, `,"href":`...)
	buf = appendString(buf, BasePath+k.d.Path(r.ParentID, r.ID))
	buf = append(buf, `,"labels":`...)
	buf = appendCompact(buf, labels)
	buf = append(buf, `,"spec":`...)
	buf = appendCompact(buf, r.Spec)
	buf = append(buf, `,"generation":`...)
	buf = strconv.AppendInt(buf, r.Generation, 10)
	buf = append(buf, `,"resource_version":"`...)
	buf = strconv.AppendInt(buf, r.Version, 10)
	buf = append(buf, '"')
	if k.d.Parent != nil {
		buf = append(buf, `,"owner_references":{"id":`...)
		buf = appendString(buf, r.ParentID)
		buf = append(buf, `,"kind":`...)
		buf = appendString(buf, k.d.Parent.Kind)
		buf = append(buf, `,"href":`...)
		buf = appendString(buf, BasePath+k.d.Parent.Path("", r.ParentID))
		buf = append(buf, '}')
	}
	buf = append(buf, `,"status":{"phase":`...)
	buf = appendString(buf, string(r.Status.Phase))
	buf = append(buf, `,"conditions":`...)
	buf = appendCompact(buf, conds)
	buf = append(buf, `},"created_time":`...)
	buf = appendTime(buf, r.CreatedTime)
	buf = append(buf, `,"updated_time":`...)
	buf = appendTime(buf, r.UpdatedTime)
	buf = append(buf, `,"created_by":`...)
	buf = appendString(buf, r.CreatedBy)
	buf = append(buf, `,"updated_by":`...)
	buf = appendString(buf, r.UpdatedBy)
	if r.DeletedTime != nil {
		buf = append(buf, `,"deleted_time":`...)
		buf = appendTime(buf, *r.DeletedTime)
	}
	if r.DeletedBy != "" {
		buf = append(buf, `,"deleted_by":`...)
		buf = appendString(buf, r.DeletedBy)
	}
	buf = append(buf, `,"tenant":`...)
	buf = appendString(buf, r.Tenant)
	buf = append(buf, `,"deletion_protection":`...)
	buf = strconv.AppendBool(buf, r.DeletionProtection)
	if r.AdapterStatuses != nil {
		reports, err := encodeStatuses(r)
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"adapter_statuses":`...)
		buf = append(buf, reports...)
	}
	return append(buf, '}'), nil
}

// fastItems reports whether a list's items can be written by appendResource: without a projection, and for a
// caller who may not see internal fields only when the database can leave them out by path (then it sets opts
// to ask for that).
func (k *kindHandler) fastItems(opts *resource.ListOptions, fields map[string]bool, public bool) bool {
	if fields != nil {
		return false
	}
	if !public || !k.d.Spec.HasInternal() {
		return true
	}
	if _, ok := k.d.Spec.InternalPaths(); !ok {
		return false
	}
	opts.WithoutInternal = true
	return true
}

// appendTime appends t as encoding/json does (RFC 3339 with nanoseconds, in quotes).
func appendTime(buf []byte, t time.Time) []byte {
	buf = append(buf, '"')
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	return append(buf, '"')
}

// appendString appends s as a JSON string. Names, ids and identities are plain ASCII almost always, and are
// copied between quotes; anything else (a quote, a backslash, a control character, non-ASCII, or the <, > and &
// that encoding/json escapes for HTML) goes through encoding/json, so that the output is the same either way.
func appendString(buf []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := json.Marshal(s)
			if err != nil { // not reached: encoding/json encodes any string
				return append(buf, `""`...)
			}
			return append(buf, quoted...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// appendCompact appends valid JSON without the blanks between tokens: the one thing json.Compact does that a
// list needs, without its validation, which jsonb's text (PostgreSQL's own output) does not need. Strings, most
// of the bytes, are found with bytes.IndexByte and copied whole; only the short stretches between them are
// looked at byte by byte.
func appendCompact(buf, src []byte) []byte {
	for len(src) > 0 {
		quote := bytes.IndexByte(src, '"')
		if quote < 0 {
			quote = len(src)
		}
		for _, c := range src[:quote] {
			if c != ' ' && c != '\n' && c != '\t' && c != '\r' {
				buf = append(buf, c)
			}
		}
		if quote == len(src) {
			break
		}
		// The string runs to the next quote not escaped by an odd number of backslashes.
		end := quote + 1
		for {
			next := bytes.IndexByte(src[end:], '"')
			if next < 0 {
				end = len(src)
				break
			}
			end += next
			backslashes := 0
			for j := end - 1; j > quote && src[j] == '\\'; j-- {
				backslashes++
			}
			end++
			if backslashes%2 == 0 {
				break
			}
		}
		buf = append(buf, src[quote:end]...)
		src = src[end:]
	}
	return buf
}
