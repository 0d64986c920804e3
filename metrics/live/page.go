package live

import (
	"bytes"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
)

// Paths the board serves.
const (
	PathPage  = "/live"
	PathState = "/live/state.json"
)

// refreshSeconds is how often the page reloads itself without JavaScript; with it, the script
// replaces the content every pollMillis.
const (
	refreshSeconds = 5
	pollMillis     = 1000
)

var funcs = template.FuncMap{
	"short": func(id string) string { return strings.TrimPrefix(id, "shardId-") },
	"ms": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return template.HTMLEscapeString(formatMillis(*v))
	},
	"half":      func(n int) int { return n / 2 },
	"sparkW":    func() int { return sparkW },
	"sparkH":    func() int { return sparkH },
	"nodeW":     func() int { return nodeW },
	"nodeH":     func() int { return nodeH },
	"refresh":   func() int { return refreshSeconds },
	"pollMs":    func() int { return pollMillis },
	"statePath": func() string { return PathPage },
}

func formatMillis(v float64) string {
	switch {
	case v >= 60_000:
		return trimFloat(v/60_000) + " min"
	case v >= 1000:
		return trimFloat(v/1000) + " s"
	}
	return trimFloat(v) + " ms"
}

func trimFloat(v float64) string {
	b, _ := json.Marshal(float64(int64(v*10)) / 10)
	return string(b)
}

var page = template.Must(template.New("page").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>esm: live</title>
<noscript><meta http-equiv="refresh" content="{{refresh}}"></noscript>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d232a; }
h2 { margin: 1.2em 0 .3em; font-size: 1.15em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; }
th, td { border: 1px solid #ccd3da; padding: .25em .55em; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
code { font-size: 12px; }
.err { color: #a31515; min-width: 18em; max-width: 36em; word-break: break-word; }
td code.seq { display: inline-block; max-width: 15em; word-break: break-all; }
svg text { font: 11px system-ui, sans-serif; }
.shard rect { stroke: #56606b; stroke-width: 1; rx: 5; }
.pending rect { fill: #fff4c2; } .reading rect { fill: #cdeccf; } .blocked rect { fill: #f6b9b3; stroke: #a31515; stroke-width: 2; }
.finished rect { fill: #dfe3e7; } .released rect { fill: #ffffff; stroke-dasharray: 4 3; }
td.state-blocked { background: #f6b9b3; font-weight: bold; }
.edge { stroke: #56606b; stroke-width: 1.4; }
.spark { fill: none; stroke: #2a6fb0; stroke-width: 1.5; }
</style>
</head>
<body>
<h1>esm: live</h1>
<main id="live">{{template "content" .}}</main>
<script>
(function () {
  var main = document.getElementById("live");
  function poll() {
    fetch("{{statePath}}?part=content", {cache: "no-store"})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { main.innerHTML = html; main.dataset.updated = String(Date.now()); })
      .catch(function () {})
      .finally(function () { setTimeout(poll, {{pollMs}}); });
  }
  setTimeout(poll, {{pollMs}});
})();
</script>
</body>
</html>
{{define "content"}}
{{if not .}}<p>No mapping is running in this process.</p>{{end}}
{{range .}}
<section class="mapping" data-function="{{.Function}}" data-stream="{{.Stream}}">
<h2>{{.Function}} ← {{.Stream}}</h2>
<p>{{if .UUID}}Mapping <code>{{.UUID}}</code>. {{end}}Iterator age: <b>{{ms .IteratorAgeMillis}}</b>.
On-failure destination: {{.Delivered}} records delivered{{if .LastDelivery}} (last {{.LastDelivery.Format "15:04:05"}}){{end}}, {{.DeliveryFailures}} failed sends, {{.Dropped}} records dropped.</p>
<svg class="lineage" role="img" aria-label="lineage of {{.Stream}}" width="{{.Graph.Width}}" height="{{.Graph.Height}}" viewBox="0 0 {{.Graph.Width}} {{.Graph.Height}}" xmlns="http://www.w3.org/2000/svg">
{{range .Graph.Edges}}<line class="edge" x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}"/>
{{end}}{{range .Graph.Nodes}}<g class="shard {{.State}}" data-shard="{{.ShardID}}" data-state="{{.State}}" data-parents="{{.Parents}}" data-depth="{{.Depth}}" transform="translate({{.X}},{{.Y}})">
<rect width="{{nodeW}}" height="{{nodeH}}"/><text x="{{half nodeW}}" y="18" text-anchor="middle">{{.ShardID}}</text><text x="{{half nodeW}}" y="35" text-anchor="middle">{{.State}}</text>
</g>
{{end}}</svg>
<table class="shards">
<thead><tr><th>shard</th><th>parents</th><th>state</th><th>owner</th><th>iterator age</th><th>age, last 5 min</th><th>checkpoint</th><th>retrying batch</th><th>last error</th><th>sent to destination</th></tr></thead>
<tbody>
{{range .Shards}}<tr data-shard="{{.ShardID}}" data-state="{{.State}}">
<td><code>{{.ShardID}}</code></td><td>{{range .Parents}}<code>{{short .}}</code> {{end}}</td><td class="state-{{.State}}">{{.State}}</td><td>{{.Owner}}</td>
<td>{{ms .IteratorAgeMillis}}</td>
<td>{{if .Spark}}<svg width="{{sparkW}}" height="{{sparkH}}" viewBox="0 0 {{sparkW}} {{sparkH}}"><polyline class="spark" points="{{.Spark}}"/></svg>{{end}}</td>
<td><code class="seq">{{.Checkpoint}}</code></td>
<td>{{if .RetryingFirst}}<code class="seq">{{.RetryingFirst}}</code>{{if ne .RetryingFirst .RetryingLast}} … <code class="seq">{{.RetryingLast}}</code>{{end}}{{end}}</td>
<td class="err">{{.LastError}}</td><td>{{if or .Delivered .Dropped}}{{.Delivered}}{{if .Dropped}} ({{.Dropped}} dropped){{end}}{{end}}</td>
</tr>
{{end}}</tbody>
</table>
</section>
{{end}}
{{end}}`))

// Handler serves the page at PathPage (?part=content: its content alone, which the script
// fetches) and the state as JSON at PathState.
func (b *Board) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPage, func(w http.ResponseWriter, r *http.Request) {
		name := "page"
		if r.URL.Query().Get("part") == "content" {
			name = "content"
		}
		var buf bytes.Buffer
		if err := page.ExecuteTemplate(&buf, name, b.Snapshot()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes())
	})
	mux.HandleFunc("GET "+PathState, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(b.Snapshot())
	})
	return mux
}
