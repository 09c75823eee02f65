package controlplane

import (
	"context"
	"encoding/json"
	"time"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// Metrics returns live figures of a running sandbox.
func (s *Service) Metrics(ctx context.Context, p Principal, id string) (Metrics, error) {
	if _, _, err := s.RunningAgent(ctx, p, id); err != nil {
		return Metrics{}, err
	}
	return s.host.Metrics(ctx, id)
}

// UsagePeriod is one stretch of time in one state at one size.
type UsagePeriod struct {
	State    sandbox.State
	From, To time.Time
	CPU      float64
	RAMMB    int
	DiskGB   int
}

// Usage is billed usage over a window: only running bills compute
// (cpu-seconds, GB-RAM-seconds), stopped bills local storage (GB-hours),
// archived bills nothing. Resizes bill the old size up to the resize and
// the new size after.
type Usage struct {
	From, To       time.Time
	CPUSeconds     float64
	RAMGBSeconds   float64
	StorageGBHours float64
	Periods        []UsagePeriod
}

// Usage computes billed usage from the sandbox's event history.
func (s *Service) Usage(ctx context.Context, p Principal, id string, from, to time.Time) (Usage, error) {
	sb, err := s.Get(ctx, p, id, true)
	if err != nil {
		return Usage{}, err
	}
	evs, err := s.store.SandboxEvents(ctx, id)
	if err != nil {
		return Usage{}, err
	}
	if from.IsZero() || from.Before(sb.CreatedAt) {
		from = sb.CreatedAt
	}
	if to.IsZero() {
		to = s.now()
	}
	return usageFrom(sb, evs, from, to), nil
}

// usageFrom replays state changes and resizes. Sizes before the first
// "created"/"resized" event are the record's creation sizes when known.
func usageFrom(sb sandbox.Sandbox, evs []store.Event, from, to time.Time) Usage {
	u := Usage{From: from, To: to}
	cur := UsagePeriod{State: sandbox.StateCreating, From: sb.CreatedAt, CPU: sb.CPU, RAMMB: sb.RAMMB, DiskGB: sb.DiskGB}
	// The first size event tells the creation size; before it, assume the
	// current one.
	for _, e := range evs {
		if e.Type == "created" {
			var sz struct {
				CPU    float64 `json:"cpu"`
				RAMMB  int     `json:"ram_mb"`
				DiskGB int     `json:"disk_gb"`
			}
			if json.Unmarshal([]byte(e.Data), &sz) == nil {
				cur.CPU, cur.RAMMB, cur.DiskGB = sz.CPU, sz.RAMMB, sz.DiskGB
			}
			break
		}
	}
	flush := func(at time.Time) {
		cur.To = at
		start, end := maxTime(cur.From, from), minTime(cur.To, to)
		if end.After(start) {
			d := end.Sub(start).Seconds()
			switch cur.State {
			case sandbox.StateRunning:
				u.CPUSeconds += cur.CPU * d
				u.RAMGBSeconds += float64(cur.RAMMB) / 1024 * d
			case sandbox.StateStopped:
				u.StorageGBHours += float64(cur.DiskGB) * d / 3600
			}
			p := cur
			p.From, p.To = start, end
			u.Periods = append(u.Periods, p)
		}
		cur.From = at
	}
	for _, e := range evs {
		switch e.Type {
		case store.EventStateChanged:
			var c store.StateChange
			if json.Unmarshal([]byte(e.Data), &c) != nil {
				continue
			}
			flush(e.CreatedAt)
			cur.State = c.To
		case "resized":
			var sz struct {
				CPU    float64 `json:"cpu"`
				RAMMB  int     `json:"ram_mb"`
				DiskGB int     `json:"disk_gb"`
			}
			if json.Unmarshal([]byte(e.Data), &sz) != nil {
				continue
			}
			flush(e.CreatedAt)
			cur.CPU, cur.RAMMB, cur.DiskGB = sz.CPU, sz.RAMMB, sz.DiskGB
		}
	}
	flush(to)
	return u
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
