package service

import (
	"os"
	"strconv"
	"time"
)

// Flag defaults from the environment. Each service's flags fall back to a
// LOOM_* variable so that a Deployment can set them without editing args;
// an unset or unparsable variable yields def.

// EnvInt returns the integer in environment variable k, or def.
func EnvInt(k string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return n
	}
	return def
}

// EnvFloat returns the number in environment variable k, or def.
func EnvFloat(k string, def float64) float64 {
	if n, err := strconv.ParseFloat(os.Getenv(k), 64); err == nil {
		return n
	}
	return def
}

// EnvBool returns the boolean in environment variable k, or def.
func EnvBool(k string, def bool) bool {
	if b, err := strconv.ParseBool(os.Getenv(k)); err == nil {
		return b
	}
	return def
}

// EnvDuration returns the duration (time.ParseDuration syntax) in
// environment variable k, or def.
func EnvDuration(k string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(k)); err == nil {
		return d
	}
	return def
}

// EnvString returns environment variable k, or def when it is unset or
// empty.
func EnvString(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
