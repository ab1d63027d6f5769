package cincinnatisim

import (
	"fmt"
	"time"
)

// FaultKind names a fault the simulator injects into graph responses.
type FaultKind string

// Fault kinds.
const (
	// FaultServerError answers 503 with a {kind,value} body.
	FaultServerError FaultKind = "server_error"
	// FaultLatency waits Fault.Latency (or until the client gives up) and then answers normally.
	FaultLatency FaultKind = "latency"
	// FaultInvalidJSON answers 200 with the response body truncated to half its length.
	FaultInvalidJSON FaultKind = "invalid_json"
	// FaultBadRequest answers 400 with a {kind,value} body.
	FaultBadRequest FaultKind = "bad_request"
)

// Fault is an injected failure of the graph endpoint.
type Fault struct {
	Kind FaultKind
	// Latency is the delay of a FaultLatency; it must be positive for that kind.
	Latency time.Duration
	// Count is the number of graph requests the fault affects; 0 means until ClearFaults.
	Count int
}

// activeFault is the installed fault and how many requests it still affects (remaining 0: unlimited).
type activeFault struct {
	Fault
	remaining int
}

// validate returns an error wrapping ErrInvalidFault if f cannot be injected.
func (f Fault) validate() error {
	switch f.Kind {
	case FaultServerError, FaultInvalidJSON, FaultBadRequest:
	case FaultLatency:
		if f.Latency <= 0 {
			return fmt.Errorf("%w: latency fault needs a positive latency", ErrInvalidFault)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidFault, f.Kind)
	}
	if f.Count < 0 {
		return fmt.Errorf("%w: negative count %d", ErrInvalidFault, f.Count)
	}
	return nil
}

// SetFault installs f, replacing any fault in effect; it applies to the next f.Count graph requests (all of them
// while Count is 0) until ClearFaults. It returns an error wrapping ErrInvalidFault, and changes nothing, if the kind
// is unknown, a latency fault has no positive latency, or Count is negative.
func (s *Simulator) SetFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.fault = &activeFault{Fault: f, remaining: f.Count}
	return nil
}

// ClearFaults removes any fault in effect; requests are answered normally again.
func (s *Simulator) ClearFaults() {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	s.fault = nil
}

// takeFault returns the fault for one request (the zero Fault if none) and uses up one of its count.
func (s *Simulator) takeFault() Fault {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.fault == nil {
		return Fault{}
	}
	f := s.fault.Fault
	if s.fault.remaining > 0 {
		s.fault.remaining--
		if s.fault.remaining == 0 {
			s.fault = nil
		}
	}
	return f
}
