package configs

import (
	"github.com/go-viper/mapstructure/v2"
)

// decodeHooks turn "30s" into durations and "a,b" (from the environment)
// into string lists.
func decodeHooks() mapstructure.DecodeHookFunc {
	return mapstructure.ComposeDecodeHookFunc(
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	)
}
