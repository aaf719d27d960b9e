package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mgrpo/mgrpo/config"
	"github.com/spf13/pflag"
)

const helpText = `mgrpo-node trains language-model policies with MaxEnt-GRPO and the GRPO
family. Generators, reward evaluators, reference scorers, a learner and a
controller are actors; one process runs them all, or each node of a
cluster runs some.

Usage:
  mgrpo-node [--role ROLE] [--config FILE|recipe:NAME] [--section.key=value ...]
  mgrpo-node COMMAND [args]

Roles (--role, same as --cluster.role):
  all         every actor in this process; trains the configured recipe (default)
  learner     policy updates and weight publishing; coordinates the steps
  generator   samples completions with the latest policy weights
  reward      scores completions with the reward functions
  reference   scores completions under the reference policy
  controller  updates tau and beta from each step's statistics
  Nodes of one cluster share cluster.name and find each other through
  --cluster.seeds host:port,...

Commands:
  version     print the version
  eval        evaluate a checkpoint
  score       score completions
  init        write a starting checkpoint
  bench       run benchmarks (JSON; --peer DIR: side by side with the PyTorch peer)
  traces      list the slowest steps from Jaeger (--slow)
  help        this text

Configuration, lowest layer first (later layers override earlier ones):
  1. built-in defaults (2-digit addition, small preset, GRPO)
  2. --config FILE (.yaml, .yml, .toml) or --config recipe:NAME
       train:
         max_staleness: 2
  3. environment, MGRPO_ + SECTION__KEY in capitals, "__" between levels
       MGRPO_TRAIN__MAX_STALENESS=2  MGRPO_CONTROLLER__TAU__LR=0.1
  4. flags the user set
       --train.max_staleness=2
  Lists are comma-separated in env and flags (--rewards.funcs=accuracy,format).
  Unknown keys, wrong types, out-of-range values and impossible combinations
  stop the program with one line naming the key and exit code 2.

Recipes (--config recipe:NAME):
`

// printHelp writes the overview, the recipes and every flag.
func printHelp(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(w, helpText)
	fmt.Fprintf(w, "  %s\n\n", strings.Join(config.Recipes(), "\n  "))
	fmt.Fprint(w, "Flags (defaults shown):\n")
	fmt.Fprint(w, fs.FlagUsages())
}
