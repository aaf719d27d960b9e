// Package actors holds the proto.actor actors of a training run and the
// plain-function step they implement.
package actors
