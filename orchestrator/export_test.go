package orchestrator

// Crash stops the instance the way a SIGKILL would: its connection closes
// at once, nothing in flight is finished, and its partition leases are not
// given back (the others take them once they run out).
func (s *Service) Crash() {
	s.once.Do(func() {
		s.closing.Store(true)
		s.nc.Close()
		s.cancel()
		s.wg.Wait()
	})
}

// PartitionOf is the partition of a chat or goal id.
func (s *Service) PartitionOf(id string) int { return partitionOf(id, s.cfg.Partitions) }
