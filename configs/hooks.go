package configs

import (
	"reflect"
	"time"

	"github.com/go-viper/mapstructure/v2"
)

// decodeHooks turn "30s" into durations and "a,b" (from the environment)
// into string lists.
func decodeHooks() mapstructure.DecodeHookFunc {
	return mapstructure.ComposeDecodeHookFunc(
		durationHook,
		mapstructure.StringToSliceHookFunc(","),
	)
}

// badValue is a value a hook could not convert; it keeps the value so the
// message can show it, not the parser's words.
type badValue struct{ value any }

func (b badValue) Error() string { return "bad value" }

// durationHook parses "30s" into a duration. A number without a unit is
// refused, but for 0: "timeout: 3" was 3 nanoseconds.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, badValue{data}
	default:
		return data, nil
	}
	d, err := time.ParseDuration(data.(string))
	if err != nil {
		return nil, badValue{data}
	}
	return d, nil
}
