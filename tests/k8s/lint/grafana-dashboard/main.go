// Command grafana-dashboard checks a Grafana dashboard JSON file (the classic model that
// schemaVersion 39 declares) against Grafana's own dashboard schema, as generated into
// github.com/grafana/grafana-foundation-sdk/go: unknown fields, missing required fields,
// wrong types and the schema's limits, for the dashboard, each panel, its options and
// field config, its Prometheus targets and the template variables. It adds the enum
// checks the generated types leave out, for the fields this chart's dashboard uses.
//
// Usage: grafana-dashboard FILE. Exit status 0 when valid, 1 with one line per problem
// when not, 2 when the file cannot be read.
//
// Test infrastructure only (tests/chart/test_dashboard.py).
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

type problems []string

// add records err. v0.0.22's UnmarshalJSONStrict returns an empty cog.BuildErrors, not
// nil, on success: an empty list is no problem.
func (p *problems) add(where string, err error) {
	if err == nil {
		return
	}
	var list cog.BuildErrors
	if errors.As(err, &list) {
		for _, e := range list {
			*p = append(*p, where+": "+e.Error())
		}
		return
	}
	*p = append(*p, where+": "+err.Error())
}

func (p *problems) oneOf(where string, value any, allowed ...any) {
	if value != nil && !slices.Contains(allowed, value) {
		*p = append(*p, fmt.Sprintf("%s: %v is not one of %v", where, value, allowed))
	}
}

// validated decodes raw leniently with the panel type's own decoder (strictness is
// checked by the panel's strict decode) and runs the schema's limits on it.
func (p *problems) validated(where string, decode func([]byte) (any, error), raw json.RawMessage) {
	if decode == nil || len(raw) == 0 || string(raw) == "null" {
		return
	}
	if v, err := decode(raw); err == nil {
		if val, ok := v.(interface{ Validate() error }); ok {
			p.add(where, val.Validate())
		}
	}
}

// panels checks each panel on its own: v0.0.22's PanelOrRowPanel drops a panel it has
// decoded, so Dashboard.Validate sees none, and Panel decodes fieldConfig leniently.
func (p *problems) panels(prefix string, panels []json.RawMessage) {
	for i, raw := range panels {
		where := fmt.Sprintf("%s[%d]", prefix, i)
		var head struct {
			Type        string            `json:"type"`
			Options     json.RawMessage   `json:"options"`
			FieldConfig json.RawMessage   `json:"fieldConfig"`
			Panels      []json.RawMessage `json:"panels"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			p.add(where, err)
			continue
		}
		if head.Type == "row" {
			var row dashboard.RowPanel
			p.add(where, row.UnmarshalJSONStrict(raw))
			p.add(where, row.Validate())
			p.panels(where+".panels", head.Panels)
			continue
		}
		var panel dashboard.Panel
		p.add(where, panel.UnmarshalJSONStrict(raw))
		p.add(where, panel.Validate())
		if len(head.FieldConfig) > 0 {
			var fc dashboard.FieldConfigSource
			p.add(where+".fieldConfig", fc.UnmarshalJSONStrict(head.FieldConfig))
		}
		config, known := cog.ConfigForPanelcfgVariant(head.Type)
		if !known {
			p.add(where+".type", fmt.Errorf("unknown panel type %q", head.Type))
			continue
		}
		p.validated(where+".options", config.OptionsUnmarshaler, head.Options)
		var custom struct {
			Defaults struct {
				Custom json.RawMessage `json:"custom"`
			} `json:"defaults"`
		}
		if json.Unmarshal(head.FieldConfig, &custom) == nil {
			p.validated(where+".fieldConfig.defaults.custom", config.FieldConfigUnmarshaler, custom.Defaults.Custom)
		}
		var opts struct {
			Legend *struct {
				DisplayMode any `json:"displayMode"`
				Placement   any `json:"placement"`
			} `json:"legend"`
			Tooltip *struct {
				Mode any `json:"mode"`
			} `json:"tooltip"`
		}
		if json.Unmarshal(head.Options, &opts) == nil {
			if opts.Legend != nil {
				p.oneOf(where+".options.legend.displayMode", opts.Legend.DisplayMode, "list", "table", "hidden")
				p.oneOf(where+".options.legend.placement", opts.Legend.Placement, "bottom", "right")
			}
			if opts.Tooltip != nil {
				p.oneOf(where+".options.tooltip.mode", opts.Tooltip.Mode, "single", "multi", "none")
			}
		}
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: grafana-dashboard FILE")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Without the panel and query types registered, options, custom field config and
	// targets would be taken as untyped maps.
	runtime := cog.NewRuntime()
	runtime.RegisterPanelcfgVariant(timeseries.VariantConfig())
	runtime.RegisterPanelcfgVariant(statetimeline.VariantConfig())
	runtime.RegisterDataqueryVariant(prometheus.VariantConfig())

	var p problems
	var dash dashboard.Dashboard
	p.add("dashboard", dash.UnmarshalJSONStrict(raw))
	p.add("dashboard", dash.Validate())
	var top struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Type any `json:"type"`
				Hide any `json:"hide"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		p.add("dashboard", err)
	}
	p.panels("panels", top.Panels)
	for i, v := range top.Templating.List {
		where := fmt.Sprintf("templating.list[%d]", i)
		p.oneOf(where+".type", v.Type, "query", "adhoc", "groupby", "constant", "datasource", "interval", "textbox", "custom", "system", "snapshot")
		p.oneOf(where+".hide", v.Hide, 0.0, 1.0, 2.0)
	}
	if len(p) > 0 {
		fmt.Printf("%s: invalid\n", os.Args[1])
		for _, line := range p {
			fmt.Println("  " + line)
		}
		os.Exit(1)
	}
	fmt.Printf("%s: valid (schemaVersion %d, %d panels, %d template variables)\n",
		os.Args[1], dash.SchemaVersion, len(top.Panels), len(dash.Templating.List))
}
