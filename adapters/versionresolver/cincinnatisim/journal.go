package cincinnatisim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/hyperfleet/hyperfleet/internal/atomicfile"
)

// ErrInvalidJournal is wrapped by OpenJournal when the file holds something other than a journal.
var ErrInvalidJournal = errors.New("cincinnatisim: invalid journal")

// Journal operations.
const (
	OpPublish         = "publish"
	OpRemove          = "remove"
	OpConditionalEdge = "conditional-edge"
	OpRemoveEdge      = "remove-edge"
)

// JournalEntry is one change made through the admin endpoints: a release published or removed (PublishRequest),
// or an edge made conditional or removed (channel, arch, From, To and Risks).
type JournalEntry struct {
	Op string `json:"op"`
	PublishRequest
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	Risks []Risk `json:"risks,omitempty"`
}

// edgeEntry is the journal entry of an edge change.
func edgeEntry(op string, req EdgeRequest) JournalEntry {
	return JournalEntry{Op: op, PublishRequest: PublishRequest{Channel: req.Channel, Arch: req.Arch}, From: req.From, To: req.To, Risks: req.Risks}
}

// Journal keeps the releases published and removed, and the edges changed, through the admin endpoints in a file, so that a simulator
// restarted on the same journal serves the graphs it served before: a version resolver that already resolved a
// published release must not see it vanish (it would report RemovedFromGraph). Generated series and fixtures are
// not journalled, since the simulator's flags rebuild them. It is safe for concurrent use.
type Journal struct {
	path string

	mu      sync.Mutex
	entries []JournalEntry
}

// OpenJournal reads the journal at path, or starts an empty one if the file does not exist yet (it is written on
// the first Record). It returns an error wrapping ErrInvalidJournal if the file cannot be parsed.
func OpenJournal(path string) (*Journal, error) {
	j := &Journal{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cincinnatisim: journal: %w", err)
	}
	if err := json.Unmarshal(data, &j.entries); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidJournal, path, err)
	}
	for i := range j.entries {
		switch op := j.entries[i].Op; op {
		case OpPublish, OpRemove, OpConditionalEdge, OpRemoveEdge:
		default:
			return nil, fmt.Errorf("%w: %s: entry %d has op %q, want %s, %s, %s or %s", ErrInvalidJournal, path, i, op,
				OpPublish, OpRemove, OpConditionalEdge, OpRemoveEdge)
		}
	}
	return j, nil
}

// Entries returns a copy of the journal's entries, oldest first.
func (j *Journal) Entries() []JournalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]JournalEntry(nil), j.entries...)
}

// Replay applies the journal's entries to s in order. A removal of a release or an edge s does not hold, or a
// conditional edge between releases s no longer serves, is not an error: the series may have changed since.
func (j *Journal) Replay(s *Simulator) error {
	entries := j.Entries()
	for i := range entries {
		e := &entries[i]
		var err error
		switch e.Op {
		case OpRemove:
			s.Remove(e.Channel, e.Arch, e.Version)
		case OpRemoveEdge:
			s.RemoveEdge(e.Channel, e.Arch, e.From, e.To)
		case OpConditionalEdge:
			if s.AddConditionalEdge(e.Channel, e.Arch, e.From, e.To, e.Risks) != nil {
				continue // checked when it was recorded: it fails now only if a release it names is no longer served
			}
		default:
			err = s.Publish(e.Channel, e.Arch, e.Version, e.Payload)
		}
		if err != nil {
			return fmt.Errorf("replaying %s: %w", j.path, err)
		}
	}
	return nil
}

// Record appends e and rewrites the file (a new file renamed over the old one, so that a crash leaves either).
// On error the entry is not kept.
func (j *Journal) Record(e JournalEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	entries := append(append([]JournalEntry(nil), j.entries...), e)
	data, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return fmt.Errorf("cincinnatisim: journal: %w", err)
	}
	if err := atomicfile.WriteFile(j.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("cincinnatisim: journal: %w", err)
	}
	j.entries = entries
	return nil
}
