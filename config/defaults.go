package config

// Default returns the built-in configuration: 2-digit addition on the
// small preset, a warm start of at most 1000 steps (it stops once greedy
// accuracy holds 40%), then 200 steps of GRPO. The RL
// numbers are those measured to learn reliably in
// reference/policy-and-tasks.md §5 (lr 1e-4, 16 prompts × G=8, T=1.0);
// MaxEnt knobs default to the spec's values (maxent-grpo-spec.md §4.1).
func Default() *Config {
	return &Config{
		Model: Model{
			Preset: "small",
			Device: "cpu",
			DType:  "float32",
			Seed:   1,
		},
		Task: Task{
			Name:      "addition",
			Digits:    2,
			Numbers:   3,  // policy-and-tasks §6.4: 3 numbers in 1–20
			MaxNumber: 20, //
			Steps:     2,  // policy-and-tasks §6.4: 2–3 step problems
			Seed:      1,
		},
		Generation: Generation{
			NumGenerations:   8,
			Temperature:      1.0,
			TopP:             1.0,
			MaxCompletionLen: 8, // 3 answer digits + EOS, with slack
			RetryRounds:      1,
		},
		Rewards: Rewards{
			Funcs:        []string{"accuracy"},
			Weights:      nil,  // 1 for each function, however many rewards.funcs lists
			ScaleRewards: true, // spec §1.4 (TRL default)
		},
		MaxEnt: MaxEnt{
			Objective:          ObjectiveGRPO,
			Tau:                0.5, // spec §4.2 listwise preset
			Beta:               0.0, // policy-and-tasks §6.5: β_KL ∈ {0, 1e-3}
			QTemperature:       1.0,
			QEpsilon:           1e-6,
			LengthNormalizeRef: true,
			WeightDenominator:  WeightDenominatorTau,
			ClipObjectiveCoef:  1.0,
			SeedGRPO: SeedGRPO{
				Alpha:                   0.0417,
				NormalizeByMaxEntropy:   true,
				LengthNormalizeLogprobs: true,
			},
		},
		Controller: Controller{
			Tau: TauController{
				TargetEntropy: 1.5,
				LR:            0.05,
				EMADecay:      0.9, // spec §2.1 _TAU_ENTROPY_EMA_DECAY
			},
			Beta: BetaController{
				KLTarget: 0.07, // spec §4.2 7B recipe
				Horizon:  500,
				StepSize: 0.15, // spec §2.2 test vector
			},
			Meta: MetaController{
				Method:   "analytic",
				LR:       0.05, // spec §4.2 maxent_math.yaml
				Interval: 1,
			},
		},
		Loss: Loss{
			Type:       LossBNPO, // spec §0 default
			PolicyLoss: PolicyLossVanilla,
			Epsilon:    0.2,
			ISRatioMax: 2.0,
		},
		Optim: Optim{
			LR:             1e-4, // policy-and-tasks §5: 3e-4 noisy, 1e-3 collapses
			WarmStartLR:    2e-3,
			Beta1:          0.9,
			Beta2:          0.999,
			Eps:            1e-8,
			GradClip:       1.0,
			Schedule:       ScheduleConstant,
			MaxUpdateRatio: 1, // Adam moves each weight by ~lr: ratio ≈ lr·√n/‖w‖ ≈ 0.01–0.15 at lr 2e-3
		},
		Train: Train{
			Steps:                    200,
			PromptsPerStep:           16,
			PromptsPerPart:           8,
			WarmStartSteps:           1000, // a cap: the warm start stops once greedy accuracy holds 40% (~650 steps on small; docs/RESULTS.md)
			WarmStartBatch:           128,
			SyncEvery:                1,
			DynamicSamplingMaxRounds: 3,
			MaxSkippedSteps:          10,
			CheckpointEvery:          50,
			EvalEvery:                25,
			EvalPrompts:              256,
			Guard:                    GuardStop,
			Seed:                     1,
		},
		Cluster: Cluster{
			Role:             RoleAll,
			Name:             "mgrpo",
			Host:             "127.0.0.1",
			Generators:       1,
			MinGenerators:    1,
			RewardEvaluators: 1,
			MaxMessageBytes:  64 << 20, // go-deps §11: raise gRPC's 4 MiB on every node
			WeightChunkBytes: 1 << 20,
			WeightStream:     true,
			Hedge:            true,
		},
		Trace: Trace{
			Protocol:    "grpc",
			SampleRatio: 1.0,
			SlowStep:    SlowStepAuto,
			ServiceName: "mgrpo",
			QueryURL:    "http://127.0.0.1:16686",
		},
		Output: Output{
			Dir:             "runs",
			LogEvery:        1,
			SampleEvery:     10,
			SampleRows:      16,
			KeepCheckpoints: 5,
		},
	}
}
