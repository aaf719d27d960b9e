package config

import (
	"bytes"
	"fmt"
	"reflect"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// YAML renders the effective configuration as YAML, in struct order, with
// each key's usage as a comment. Loading the output as a --config file
// gives back an equal Config (the trainer writes it to
// runs/<name>/config.yaml).
func (c *Config) YAML() ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	if err := section(root, reflect.ValueOf(c).Elem()); err != nil {
		return nil, err
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("config: render yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: render yaml: %w", err)
	}
	return b.Bytes(), nil
}

func section(dst *yaml.Node, v reflect.Value) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("koanf")
		if name == "" {
			continue
		}
		keyNode := &yaml.Node{Kind: yaml.ScalarNode, Value: name}
		fv := v.Field(i)
		var valNode *yaml.Node
		if f.Type.Kind() == reflect.Struct && f.Type != durationType {
			valNode = &yaml.Node{Kind: yaml.MappingNode}
			keyNode.HeadComment = f.Tag.Get("help")
			if err := section(valNode, fv); err != nil {
				return err
			}
		} else {
			var err error
			if valNode, err = scalar(fv.Interface()); err != nil {
				return fmt.Errorf("config: render %s: %w", name, err)
			}
			valNode.LineComment = f.Tag.Get("help")
		}
		dst.Content = append(dst.Content, keyNode, valNode)
	}
	return nil
}

func scalar(v any) (*yaml.Node, error) {
	n := &yaml.Node{}
	switch x := v.(type) {
	case time.Duration:
		v = x.String()
	case []string:
		if x == nil {
			v = []string{}
		}
	case []float64:
		if x == nil {
			v = []float64{}
		}
	}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	if n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
	}
	return n, nil
}
