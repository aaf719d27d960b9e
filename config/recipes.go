package config

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed recipes/*.yaml
var recipeFS embed.FS

// Recipes lists the built-in recipe names (TASK-OBJECTIVE), sorted; each
// loads with --config recipe:NAME.
func Recipes() []string {
	entries, err := fs.ReadDir(recipeFS, "recipes")
	if err != nil {
		panic(fmt.Sprintf("config: embedded recipes: %v", err)) // the embed is compiled in
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Recipe returns the YAML text of a built-in recipe.
func Recipe(name string) ([]byte, error) {
	if strings.ContainsAny(name, `/\.`) {
		return nil, fmt.Errorf("config: recipe %q: %w", name, fs.ErrNotExist)
	}
	data, err := recipeFS.ReadFile("recipes/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("config: recipe %q: %w", name, err)
	}
	return data, nil
}
