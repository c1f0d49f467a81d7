package imagecache

// event is a result or a completed batch's status waiting in the outbox for
// flush.
type event struct {
	result *ImageWorkResult
	status *CacheStatus
}

// flush hands queued events to the handlers, in the order they happened. One
// goroutine at a time runs handlers; a flush that finds another one running
// leaves its events to it.
func (m *Manager) flush() {
	for {
		if !m.emitMu.TryLock() {
			return
		}
		for {
			m.mu.Lock()
			out := m.outbox
			m.outbox = nil
			m.mu.Unlock()
			if len(out) == 0 {
				break
			}
			for _, ev := range out {
				switch {
				case ev.result != nil && m.opts.onResult != nil:
					m.opts.onResult(*ev.result)
				case ev.status != nil && m.opts.onStatus != nil:
					m.opts.onStatus(*ev.status)
				}
			}
		}
		m.emitMu.Unlock()
		m.mu.Lock()
		empty := len(m.outbox) == 0
		m.mu.Unlock()
		if empty {
			return
		}
	}
}
