package schedule_test

import (
	"fmt"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/schedule"
)

// An applier parses a cluster's UpgradeSchedule once, then asks it, at the time it reconciles, whether it may roll
// a new release image now, and if not, when to come back.
func Example() {
	s, err := schedule.Parse("Europe/Berlin",
		[]schedule.WindowSpec{{Days: []string{"Saturday", "Sunday"}, Start: "22:00", Duration: "6h"}},
		[]schedule.Blackout{{
			Start: time.Date(2026, 12, 20, 0, 0, 0, 0, time.UTC),
			End:   time.Date(2027, 1, 5, 0, 0, 0, 0, time.UTC),
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, now := range []time.Time{
		time.Date(2026, 12, 16, 9, 0, 0, 0, time.UTC),  // a Wednesday morning
		time.Date(2026, 12, 19, 22, 0, 0, 0, time.UTC), // Saturday night, two hours before the freeze
		time.Date(2026, 12, 24, 9, 0, 0, 0, time.UTC),  // inside the freeze
	} {
		st := s.At(now)
		if st.Open {
			fmt.Printf("%s: roll now, the window closes at %s\n", now.Format(time.DateTime), st.Until.Format(time.RFC3339))
			continue
		}
		fmt.Printf("%s: UpgradePending until %s\n", now.Format(time.DateTime), st.NextOpen.Format(time.RFC3339))
	}

	_, err = schedule.Parse("UTC", []schedule.WindowSpec{{Days: []string{"Sat"}, Start: "22:00", Duration: "6h"}}, nil)
	fmt.Println(err)
	// Output:
	// 2026-12-16 09:00:00: UpgradePending until 2026-12-19T22:00:00+01:00
	// 2026-12-19 22:00:00: roll now, the window closes at 2026-12-20T01:00:00+01:00
	// 2026-12-24 09:00:00: UpgradePending until 2027-01-09T22:00:00+01:00
	// invalid upgrade schedule: windows[0].days[0]: unknown day "Sat", want one of Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday
}
