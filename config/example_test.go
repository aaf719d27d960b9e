package config_test

import (
	"fmt"

	"github.com/mgrpo/mgrpo/config"
)

func ExampleLoad() {
	cfg, err := config.Load(config.Sources{
		File: "recipe:addition-maxent_listwise",
		Env:  []string{"MGRPO_TRAIN__STEPS=50", "HOME=/root"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.MaxEnt.Objective, cfg.MaxEnt.Tau, cfg.Train.Steps)

	_, err = config.Load(config.Sources{Env: []string{"MGRPO_TRAIN__MAX_STALENESS=-1"}})
	fmt.Println(err)
	// Output:
	// maxent_listwise 0.2 50
	// config: train.max_staleness = -1: must be 0 or more
}
