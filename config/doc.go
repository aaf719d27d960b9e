// Package config loads, layers and validates the trainer configuration.
package config
