package orchestrator

// PartitionOf is the partition of a chat or goal id.
func (s *Service) PartitionOf(id string) int { return partitionOf(id, s.cfg.Partitions) }

// HoldShard stops the shard that owns key and fills its queue, as one chat
// whose store calls hang would; release lets it run again.
func (s *Service) HoldShard(key string) (release func()) {
	ch := s.shardOf(key)
	hold, held := make(chan struct{}), make(chan struct{})
	ch <- func() { close(held); <-hold }
	<-held
	for {
		select {
		case ch <- func() {}:
			continue
		default:
		}
		break
	}
	return func() { close(hold) }
}

// SameShard reports whether two keys are handled by one shard.
func (s *Service) SameShard(a, b string) bool { return s.shardOf(a) == s.shardOf(b) }

// MarkStarting marks a chat as having its start message logged now, as
// team-up does between recording the goal as running and the start entry.
func (s *Service) MarkStarting(comm string) (done func()) {
	s.starting.Store(comm, true)
	return func() { s.starting.Delete(comm) }
}
