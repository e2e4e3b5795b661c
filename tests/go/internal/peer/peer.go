// Package peer holds what the Go client peers of tests/integration/test_go_clients.py share:
// sub-command dispatch, the common flags, JSON lines on stdout, record values, and the
// bookkeeping of a reader that stops once every partition delivered an end marker.
package peer

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Run calls the sub-command named by the first argument with the remaining ones.
func Run(commands map[string]func(args []string)) {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		names := make([]string, 0, len(commands))
		for name := range commands {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: %s {%s} [flags]\n", os.Args[0], strings.Join(names, "|"))
		os.Exit(2)
	}
	commands[os.Args[1]](os.Args[2:])
}

// Common are the flags of every sub-command.
type Common struct {
	Bootstrap  string
	Topic      string
	Partitions int
	Timeout    time.Duration
}

// Flags is a flag set for a sub-command with the common flags registered.
func Flags(name string) (*flag.FlagSet, *Common) {
	c := &Common{}
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.StringVar(&c.Bootstrap, "bootstrap", "127.0.0.1:9092", "comma-separated host:port list")
	fs.StringVar(&c.Topic, "topic", "", "topic")
	fs.IntVar(&c.Partitions, "partitions", 1, "partitions of the topic")
	fs.DurationVar(&c.Timeout, "timeout", 60*time.Second, "deadline of the whole sub-command")
	return fs, c
}

// Brokers splits the bootstrap list.
func (c *Common) Brokers() []string { return strings.Split(c.Bootstrap, ",") }

// Context ends at the sub-command's deadline.
func (c *Common) Context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.Timeout)
}

var out = struct {
	sync.Mutex
	*json.Encoder
}{Encoder: json.NewEncoder(os.Stdout)}

// Emit prints v as one JSON line on stdout.
func Emit(v any) {
	out.Lock()
	defer out.Unlock()
	if err := out.Encode(v); err != nil {
		panic(err)
	}
}

// Check ends the process with {"error": ...} on stdout and exit status 1 if err is not nil.
func Check(err error, what string) {
	if err != nil {
		Fail("%s: %v", what, err)
	}
}

// Fail ends the process with {"error": ...} on stdout and exit status 1.
func Fail(format string, args ...any) {
	Emit(map[string]string{"error": fmt.Sprintf(format, args...)})
	os.Exit(1)
}

// Value is the value of the i-th record of a partition written under tag (the tests build the
// same strings).
func Value(tag string, partition, i int) string {
	return fmt.Sprintf("%s-p%d-%d", tag, partition, i)
}

// Poll calls cond every 20 ms until it is true; fails the process at the context's deadline.
func Poll(ctx context.Context, what string, cond func() bool) {
	for !cond() {
		select {
		case <-ctx.Done():
			Fail("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Partition is what a reader got from one partition, end marker excluded.
type Partition struct {
	Values  []string `json:"values"`
	Offsets []int64  `json:"offsets"`
	Codecs  []string `json:"codecs,omitempty"` // the compression of each record's batch, if known
}

// Reader collects records until every partition of a topic delivered the end marker. It is
// safe for concurrent use (a group's claims are consumed on goroutines of their own).
type Reader struct {
	mu         sync.Mutex
	marker     string
	partitions int
	got        map[int32]*Partition
	ended      map[int32]bool
}

// NewReader waits for marker on partitions 0..partitions-1; with marker "" it only collects.
func NewReader(marker string, partitions int) *Reader {
	return &Reader{marker: marker, partitions: partitions, got: map[int32]*Partition{}, ended: map[int32]bool{}}
}

// Add records one record; it returns whether the partition has delivered its end marker (a
// record after it is not recorded).
func (r *Reader) Add(partition int32, offset int64, value []byte, codec string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended[partition] || (r.marker != "" && string(value) == r.marker) {
		r.ended[partition] = true
		return true
	}
	p := r.got[partition]
	if p == nil {
		p = &Partition{Values: []string{}, Offsets: []int64{}}
		r.got[partition] = p
	}
	p.Values = append(p.Values, string(value))
	p.Offsets = append(p.Offsets, offset)
	if codec != "" {
		p.Codecs = append(p.Codecs, codec)
	}
	return false
}

// IsMarker tells whether value is the end marker.
func (r *Reader) IsMarker(value []byte) bool { return r.marker != "" && string(value) == r.marker }

// Done tells whether every partition delivered the end marker.
func (r *Reader) Done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ended) == r.partitions
}

// Missing lists the partitions whose end marker has not come yet.
func (r *Reader) Missing() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []int32
	for p := int32(0); p < int32(r.partitions); p++ {
		if !r.ended[p] {
			missing = append(missing, p)
		}
	}
	return missing
}

// Result is what every partition delivered, keyed by partition number.
func (r *Reader) Result() map[int32]*Partition {
	r.mu.Lock()
	defer r.mu.Unlock()
	result := map[int32]*Partition{}
	for p := int32(0); p < int32(r.partitions); p++ {
		if got := r.got[p]; got != nil {
			result[p] = got
		} else {
			result[p] = &Partition{Values: []string{}, Offsets: []int64{}}
		}
	}
	return result
}

// Assignment tracks the partitions a group member owns and the changes it saw.
type Assignment struct {
	mu     sync.Mutex
	owned  map[int32]bool
	events []Event
}

// Event is one change of a member's assignment: "assigned", "revoked" or "lost" partitions.
type Event struct {
	Kind       string  `json:"kind"`
	Partitions []int32 `json:"partitions"`
}

// Assigned adds partitions to the member's assignment.
func (a *Assignment) Assigned(ps []int32) { a.change("assigned", ps, true) }

// Revoked removes partitions from the member's assignment.
func (a *Assignment) Revoked(kind string, ps []int32) { a.change(kind, ps, false) }

func (a *Assignment) change(kind string, ps []int32, own bool) {
	if len(ps) == 0 {
		return // a callback without partitions of the topic: nothing changed
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.owned == nil {
		a.owned = map[int32]bool{}
	}
	sorted := append([]int32{}, ps...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	a.events = append(a.events, Event{kind, sorted})
	for _, p := range ps {
		if own {
			a.owned[p] = true
		} else {
			delete(a.owned, p)
		}
	}
}

// Owned is the current assignment, sorted.
func (a *Assignment) Owned() []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	owned := []int32{}
	for p := range a.owned {
		owned = append(owned, p)
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i] < owned[j] })
	return owned
}

// Events are the changes so far.
func (a *Assignment) Events() []Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Event{}, a.events...)
}

// Split tells whether the members own disjoint non-empty sets covering partitions 0..n-1.
func Split(n int, members ...*Assignment) bool {
	seen := map[int32]bool{}
	for _, m := range members {
		owned := m.Owned()
		if len(owned) == 0 {
			return false
		}
		for _, p := range owned {
			if seen[p] {
				return false
			}
			seen[p] = true
		}
	}
	return len(seen) == n
}
