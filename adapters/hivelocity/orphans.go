package hivelocity

import "time"

// DefaultOrphanGrace is how long an orphaned device is left alone before it is released.
const DefaultOrphanGrace = 15 * time.Minute
