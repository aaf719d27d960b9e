// Package rewards scores completions and turns scores into MaxEnt-GRPO
// weights, advantages and controller updates.
package rewards
