package orchestrator

// PartitionOf is the partition of a chat or goal id.
func (s *Service) PartitionOf(id string) int { return partitionOf(id, s.cfg.Partitions) }
