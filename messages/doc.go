// Package messages holds the protobuf messages the actors exchange.
package messages
