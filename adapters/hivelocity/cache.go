package hivelocity

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

// fetchTimeout bounds a shared read: it runs on behalf of every waiting reconcile, so no one caller's context
// bounds it.
const fetchTimeout = 30 * time.Second

// snapshot is a device list and when it was asked for: every tag write visible when the request was sent is in
// it.
type snapshot struct {
	devices []hvclient.Device
	taken   time.Time
}

// deviceCache shares one device list between the reconciles of every pool: settled pools cost one list call per
// TTL, however many there are and however many devices they hold. A write by the provisioner invalidates it, so
// the next reconcile looks again; concurrent reconciles that miss share one call (singleflight).
type deviceCache struct {
	list  func(ctx context.Context) ([]hvclient.Device, error)
	clock clock.PassiveClock
	ttl   time.Duration
	group singleflight.Group

	mu   sync.Mutex
	snap *snapshot
	gen  uint64 // bumped by every invalidation; a list asked for before one is not kept
}

// get returns the shared list if it is younger than the TTL, and otherwise a new one.
func (c *deviceCache) get(ctx context.Context) (*snapshot, error) {
	c.mu.Lock()
	gen := c.gen
	s := c.freshLocked(gen)
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return c.load(ctx, gen)
}

// within returns the last list if it is younger than age, even past the TTL, and otherwise get's: for a reader
// that can wait (the orphan collector), so that it costs no list of its own while pools' reconciles list.
func (c *deviceCache) within(ctx context.Context, age time.Duration) (*snapshot, error) {
	c.mu.Lock()
	s := c.snap
	c.mu.Unlock()
	if s != nil && c.clock.Since(s.taken) < age {
		return s, nil
	}
	return c.get(ctx)
}

// fresh returns a list asked for after fresh was called: the claim protocol's look at the other claims, and
// the check that a deleted pool owns nothing.
func (c *deviceCache) fresh(ctx context.Context) (*snapshot, error) {
	return c.load(ctx, c.invalidate())
}

// invalidate drops the shared list after a write and returns the new generation.
func (c *deviceCache) invalidate() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.snap = nil
	return c.gen
}

// freshLocked returns the shared list when it is of generation gen and younger than the TTL; c.mu is held.
func (c *deviceCache) freshLocked(gen uint64) *snapshot {
	if c.gen == gen && c.snap != nil && c.clock.Since(c.snap.taken) < c.ttl {
		return c.snap
	}
	return nil
}

func (c *deviceCache) load(ctx context.Context, gen uint64) (*snapshot, error) {
	ch := c.group.DoChan(strconv.FormatUint(gen, 10), func() (any, error) {
		// A caller that found no list may get here after another caller's flight for this generation ended
		// (singleflight forgets a key once its flight returns): that flight's list serves it too.
		c.mu.Lock()
		s := c.freshLocked(gen)
		c.mu.Unlock()
		if s != nil {
			return s, nil
		}
		// Not the caller's context: neither its cancellation nor its pass's send deadline may fail the others.
		fetchCtx, cancel := context.WithTimeout(context.Background(), fetchTimeout)
		defer cancel()
		taken := c.clock.Now()
		devices, err := c.list(fetchCtx)
		if err != nil {
			return nil, err
		}
		s = &snapshot{devices: devices, taken: taken}
		c.mu.Lock()
		if c.gen == gen {
			c.snap = s
		}
		c.mu.Unlock()
		return s, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*snapshot), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Errors of a pool's prerequisites: the provisioner claims nothing for a pool it could not reload.
var (
	errSSHKeyNotFound = errors.New("no SSH key of that name in the Hivelocity account")
	errOSNotOffered   = errors.New("the device's product does not offer the operating system")
)

// lookups caches what reloads need and rarely changes: the account's SSH keys and each product's operating
// systems. Only provisioning asks for them, so settled pools never do.
type lookups struct {
	api   API
	clock clock.PassiveClock
	ttl   time.Duration
	group singleflight.Group

	mu      sync.Mutex
	keys    []hvclient.SSHKey
	keysAt  time.Time
	systems map[int32]cachedOS
}

type cachedOS struct {
	names []string
	at    time.Time
}

// sshKeyID returns the id of the account's SSH key called name (0 for no name); errSSHKeyNotFound if none is.
func (l *lookups) sshKeyID(ctx context.Context, name string) (int32, error) {
	if name == "" {
		return 0, nil
	}
	l.mu.Lock()
	keys, fresh := l.keys, l.keysAt.After(l.clock.Now().Add(-l.ttl))
	l.mu.Unlock()
	if !fresh {
		v, err, _ := l.group.Do("ssh-keys", func() (any, error) { return l.api.SSHKeys(ctx) })
		if err != nil {
			return 0, err
		}
		keys = v.([]hvclient.SSHKey)
		l.mu.Lock()
		l.keys, l.keysAt = keys, l.clock.Now()
		l.mu.Unlock()
	}
	for _, k := range keys {
		if k.Name == name {
			return k.ID, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", errSSHKeyNotFound, name)
}

// osName returns the name product offers for the operating system want (see resolveOS); errOSNotOffered if it
// offers none.
func (l *lookups) osName(ctx context.Context, product int32, want string) (string, error) {
	l.mu.Lock()
	c := l.systems[product]
	fresh := c.at.After(l.clock.Now().Add(-l.ttl))
	l.mu.Unlock()
	if !fresh {
		v, err, _ := l.group.Do("os-"+strconv.Itoa(int(product)), func() (any, error) { return l.api.OperatingSystems(ctx, product) })
		if err != nil {
			return "", err
		}
		c = cachedOS{names: v.([]string), at: l.clock.Now()}
		l.mu.Lock()
		if l.systems == nil {
			l.systems = map[int32]cachedOS{}
		}
		l.systems[product] = c
		l.mu.Unlock()
	}
	name, ok := resolveOS(want, c.names)
	if !ok {
		return "", fmt.Errorf("%w: product %d offers %q, not %q", errOSNotOffered, product, c.names, want)
	}
	return name, nil
}
