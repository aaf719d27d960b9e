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
controller are actors; one process runs them all, or the nodes of a
cluster share them.

Usage:
  mgrpo-node [--role ROLE] [--config FILE|recipe:NAME] [--section.key=value ...]
  mgrpo-node COMMAND [args]

Roles (--role, same as --cluster.role; all, or a comma list of the others):
  all         every actor in this process; trains the configured recipe (default)
  learner     the learner, the controller and the step coordinator: trains;
              worker nodes join it (its membership port: cluster.port, 6330)
  generator   samples completions with the latest policy weights
  reward      scores completions with the reward functions
  reference   scores completions under the reference policy
  A worker node needs only its roles and the learner's address:
    mgrpo-node --role generator --cluster.seeds LEARNER_HOST:6330
  the learner sends it the configuration, tokenizer and weights.

Commands:
  version     print the version
  eval        evaluate a checkpoint
  score       score completions
  init        write a starting checkpoint
  bench       run benchmarks (JSON; --peer DIR: side by side with the PyTorch peer)
  traces      list the slowest steps from Jaeger (--slow)
  certs       write a CA and node certificates for mutual TLS between nodes
              (--renew NAME,...: sign those anew with the CA in --out;
              --rotate-ca, then --drop-old-ca: replace the CA, no restart)
  report      write the page of one or more runs, overlaid (RUN_DIR...)
  device-check print the GPU that --model.device cuda would use (mgrpo-node-cuda)
  help        this text

GPU (--model.device cuda, model.dtype float32 or bf16; bench --device cuda):
  mgrpo-node starts on any machine and computes on the CPU; it hands a GPU
  run to mgrpo-node-cuda (make build-cuda), found beside it, on PATH or by
  MGRPO_CUDA_BINARY, with the same arguments and environment, once that
  binary's device-check has found a GPU; if none, one line and exit code 2.

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
  stop the program with one line naming the key and exit code 2. Values that
  cannot be meant are out of range: learning rates above 1, coefficients
  (tau, beta, alpha, ...) above 1000, cluster.request_timeout below 10ms.

Exit codes:
  0    done
  1    failed (one line on stderr says why)
  2    bad flags or configuration
  3    interrupted (SIGINT, SIGTERM or SIGHUP, or standard output closed):
       stopped after the step in flight with a checkpoint; the last line
       says how to resume
  4    train.max_skipped_steps steps in a row skipped, or a guard stopped
       the run (train.guard=stop): stopped with a checkpoint of the last
       good state
  130  interrupted twice: exited at once, without a checkpoint

Recipes (--config recipe:NAME):
`

// printHelp writes the overview, the recipes and every flag.
func printHelp(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprint(w, helpText)
	fmt.Fprintf(w, "  %s\n\n", strings.Join(config.Recipes(), "\n  "))
	fmt.Fprint(w, "Flags (defaults shown):\n")
	fmt.Fprint(w, fs.FlagUsages())
}
