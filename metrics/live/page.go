package live

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"
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
	"short": shortID,
	"ms": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return formatMillis(*v)
	},
	"msf":       formatMillis,
	"clock":     func(t *time.Time) string { return clock(t) },
	"ago":       ago,
	"sparkW":    func() int { return sparkW },
	"sparkH":    func() int { return sparkH },
	"refresh":   func() int { return refreshSeconds },
	"pollMs":    func() int { return pollMillis },
	"statePath": func() string { return PathPage },
	"sel":       func(a, b string) bool { return a == b },
	"rowsAll":   func(q query) bool { return q.Rows == 0 },
	"withRows": func(q query, rows string) template.URL {
		v := url.Values{"rows": {rows}, "sort": {q.Sort}}
		if q.State != "" {
			v.Set("state", q.State)
		}
		if q.Owner != "" {
			v.Set("owner", q.Owner)
		}
		return template.URL("?" + v.Encode())
	},
	"display": displayState,
	"sorts":   func() []string { return []string{SortState, SortAge, SortOwner, SortShard} },
}

// clock is t's time of day, UTC, to the second; "–" when nil.
func clock(t *time.Time) string {
	if t == nil {
		return "–"
	}
	return t.UTC().Format("15:04:05")
}

// ago is how long before now t was, to the second.
func ago(t *time.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return now.Sub(*t).Round(time.Second).String()
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
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>esm: live</title>
<noscript><meta http-equiv="refresh" content="{{refresh}}"></noscript>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em; color: #1d232a; }
h2 { margin: 1em 0 .3em; font-size: 1.15em; } h3 { margin: .8em 0 .3em; font-size: 1em; }
table { border-collapse: collapse; margin: .4em 0 1em; }
th, td { border: 1px solid #ccd3da; padding: .2em .5em; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
caption { text-align: left; font-weight: bold; padding: .2em 0; }
code { font-size: 12px; }
td:first-child > code { white-space: nowrap; }
.err { color: #a31515; min-width: 18em; max-width: 40em; word-break: break-word; }
td code.seq { display: inline-block; max-width: 15em; word-break: break-all; }
#updated { position: sticky; top: 0; background: #fff; padding: .3em 0; margin: 0; border-bottom: 1px solid #ccd3da; z-index: 1; }
#updated.stale { background: #fff1c2; color: #7a4b00; font-weight: bold; }
.count { display: inline-block; padding: 0 .45em; margin-right: .3em; border-radius: 3px; border: 1px solid #aab3bb; }
.state-pending, .node.pending { background: #fff4c2; } .state-reading, .node.reading { background: #cdeccf; }
.state-blocked, .node.blocked { background: #f6b9b3; font-weight: bold; } .state-finished, .node.finished { background: #dfe3e7; }
.state-released, .node.released { background: #fff; border-style: dashed; } .state-unreachable, .node.unreachable { background: #e3d1f4; }
table.blocked { border: 2px solid #a31515; }
.lineage .gen { display: flex; flex-wrap: wrap; gap: 3px; margin: 2px 0; align-items: center; }
.gen-label { width: 4.5em; color: #56606b; font-size: 12px; }
.node { display: inline-block; min-width: 2.6em; padding: 1px 3px; border: 1px solid #56606b; border-radius: 3px; font: 11px/1.4 ui-monospace, monospace; text-align: center; }
.node.blocked { outline: 2px solid #a31515; outline-offset: -1px; }
.spark { fill: none; stroke: #2a6fb0; stroke-width: 1.5; }
.axis { font-size: 11px; color: #56606b; font-weight: normal; }
form.filter { margin: .6em 0; } form.filter label { margin-right: .8em; }
</style>
</head>
<body>
<h1>esm: live</h1>
<p id="updated">Snapshot at {{.SnapshotAt.Format "15:04:05"}} UTC (the page reloads every {{refresh}} s without JavaScript).</p>
<main id="live">{{template "content" .}}</main>
<script>
(function () {
  var main = document.getElementById("live"), bar = document.getElementById("updated");
  var okAt = Date.now(), fails = 0, lastErr = "", timer;
  function morph(a, b) {
    if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) { a.replaceWith(b); return; }
    if (a.nodeType === 3) { if (a.nodeValue !== b.nodeValue) a.nodeValue = b.nodeValue; return; }
    if (a.nodeType !== 1) return;
    for (var i = a.attributes.length - 1; i >= 0; i--) { var n = a.attributes[i].name; if (!b.hasAttribute(n)) a.removeAttribute(n); }
    for (var j = 0; j < b.attributes.length; j++) { var at = b.attributes[j]; if (a.getAttribute(at.name) !== at.value) a.setAttribute(at.name, at.value); }
    if (a.nodeName === "SELECT" || a.nodeName === "INPUT") return;
    var ac = Array.prototype.slice.call(a.childNodes), bc = Array.prototype.slice.call(b.childNodes);
    for (var k = 0; k < bc.length; k++) { if (k < ac.length) morph(ac[k], bc[k]); else a.appendChild(bc[k]); }
    for (var m = bc.length; m < ac.length; m++) a.removeChild(ac[m]);
  }
  function show() {
    var s = Math.round((Date.now() - okAt) / 1000);
    var text = "Last updated " + new Date(okAt).toLocaleTimeString() + " (" + s + " s ago).";
    var stale = fails > 0 || s > 5;
    if (fails > 0) text = "Stale: " + fails + " update(s) failed (" + lastErr + "). " + text;
    bar.textContent = text; bar.className = stale ? "stale" : "";
  }
  function poll() {
    clearTimeout(timer);
    var p = new URLSearchParams(location.search); p.set("part", "content");
    fetch("{{statePath}}?" + p.toString(), {cache: "no-store"})
      .then(function (r) { return r.ok ? r.text() : r.text().then(function (t) { return Promise.reject(new Error(r.status + " " + t.slice(0, 200))); }); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString('<main id="live">' + html + "</main>", "text/html");
        morph(main, doc.getElementById("live"));
        okAt = Date.now(); fails = 0; main.dataset.updated = String(okAt);
      })
      .catch(function (e) { fails++; lastErr = String(e && e.message || e); })
      .finally(function () { show(); timer = setTimeout(poll, {{pollMs}}); });
  }
  document.addEventListener("change", function (e) {
    var f = e.target.form;
    if (!f || !f.classList.contains("filter")) return;
    var p = new URLSearchParams(new FormData(f));
    history.replaceState(null, "", "?" + p.toString());
    poll();
  });
  setInterval(show, 1000);
  timer = setTimeout(poll, {{pollMs}});
})();
</script>
</body>
</html>
{{define "content"}}
<p class="snapshot" data-snapshot="{{.SnapshotAt.Format "2006-01-02T15:04:05.000Z07:00"}}">{{if eq .Scope "fleet"}}Every worker's shards, as {{end}}{{with .Worker}}<b>{{.}}</b>{{else}}this process{{end}} {{if eq .Scope "fleet"}}and the workers it reached see them{{else}}sees them{{end}} at {{.SnapshotAt.Format "15:04:05"}} UTC.</p>
{{if not .Mappings}}<p>No mapping is running in this process.</p>{{end}}
{{$q := .Query}}{{$now := .SnapshotAt}}
{{range .Mappings}}
<section class="mapping" data-function="{{.Function}}" data-stream="{{.Stream}}">
<h2>{{.Function}} ← {{.Stream}}</h2>
<p class="summary">{{if .UUID}}Mapping <code>{{.UUID}}</code>. {{end}}<b>{{.Summary.Shards}} shards</b>: {{range .States}}<span class="count state-{{.State}}" data-state="{{.State}}">{{.N}} {{.State}}</span>{{end}}
Iterator age: <b>{{ms .IteratorAgeMillis}}</b>.
On-failure destination: {{.Delivered}} records delivered{{if .LastDelivery}} (last {{clock .LastDelivery}}){{end}}, {{.DeliveryFailures}} failed sends, {{.Dropped}} records dropped.{{if .Skipped}} <span class="skipped">Skipped by an operator: {{.Skipped}} batches.</span>{{end}}</p>
{{with .Rewind}}<p class="rewind" data-rewind-revision="{{.Revision}}" data-rewind-state="{{.State}}">{{if .InProgress}}<b>Rewind in progress</b> ({{.State}}): invoking nothing until it is applied. {{else}}Last rewind, {{.State}}{{with .DoneAt}} at {{clock .}}{{end}}: {{end}}revision {{.Revision}}, {{.Request}}{{if .By}}, asked by {{.By}}{{end}}{{with .RequestedAt}} at {{clock .}}{{end}}.{{if .Report}} {{.Report}}{{end}}</p>
{{end}}{{if .Blocked}}<table class="blocked"><caption>{{len .Blocked}} blocked shard(s), longest first</caption>
<thead><tr><th>shard</th><th>owner</th><th>blocked since</th><th>attempts</th><th>last error</th><th>error at</th></tr></thead><tbody>
{{range .Blocked}}<tr data-shard="{{.ShardID}}"><td><code>{{.ShardID}}</code></td><td>{{.Owner}}</td><td>{{clock .BlockedSince}} ({{ago .BlockedSince $now}})</td><td>{{.Attempts}}</td><td class="err">{{.LastError}}</td><td>{{clock .LastErrorAt}}</td></tr>
{{end}}</tbody></table>{{end}}
{{if .Workers}}<table class="workers"><caption>Workers{{if .Silent}}: {{.Silent}} not answering{{end}}</caption>
<thead><tr><th>worker</th><th>page</th><th>status</th><th>shards read</th><th>last answer</th><th>error</th></tr></thead><tbody>
{{range .Workers}}<tr data-worker="{{.ID}}" data-status="{{.Status}}"><td>{{.ID}}</td><td>{{with .Addr}}<a href="http://{{.}}/live">{{.}}</a>{{end}}</td><td class="state-{{if eq .Status "ok" "this worker"}}reading{{else}}unreachable{{end}}">{{.Status}}</td><td>{{.Shards}}</td><td>{{clock .LastAnswer}}</td><td class="err">{{.Error}}</td></tr>
{{end}}</tbody></table>{{end}}
<h3>Lineage: the open shards by generation{{if .NFolded}}, {{.NFolded}} finished folded{{end}}</h3>
<div class="lineage" role="img" aria-label="lineage of {{.Stream}}">
{{range .Open}}<div class="gen" data-depth="{{.Depth}}"><span class="gen-label">gen {{.Depth}}</span>{{range .Nodes}}<span class="node {{.State}}{{if .Unreachable}} unreachable{{end}}" data-shard="{{.ShardID}}" data-state="{{.State}}" data-parents="{{.Parents}}" data-depth="{{.Depth}}" title="{{.Title}}">{{.Short}}</span>{{end}}</div>
{{end}}{{if .Folded}}<details class="history"><summary>finished history: {{.NFolded}} shards</summary>
{{range .Folded}}<div class="gen" data-depth="{{.Depth}}"><span class="gen-label">gen {{.Depth}}</span>{{range .Nodes}}<span class="node finished" data-shard="{{.ShardID}}" data-state="finished" data-parents="{{.Parents}}" data-depth="{{.Depth}}" title="{{.Title}}">{{.Short}}</span>{{end}}</div>
{{end}}</details>{{end}}
</div>
<form class="filter" method="get" action="{{statePath}}">
<label>state <select name="state"><option value="">all</option>{{range .States}}<option value="{{.State}}"{{if sel $q.State .State}} selected{{end}}>{{.State}}</option>{{end}}{{if sel $q.State "unreachable"}}<option selected>unreachable</option>{{end}}</select></label>
<label>owner <select name="owner"><option value="">all</option>{{range .Owners}}<option{{if sel $q.Owner .}} selected{{end}}>{{.}}</option>{{end}}</select></label>
<label>sort <select name="sort">{{range $s := sorts}}<option{{if sel $q.Sort $s}} selected{{end}}>{{$s}}</option>{{end}}</select></label>
<label>rows <select name="rows"><option value="100"{{if eq $q.Rows 100}} selected{{end}}>100</option><option value="all"{{if rowsAll $q}} selected{{end}}>all</option></select></label>
<noscript><button>apply</button></noscript>
</form>
<table class="shards">
<thead><tr><th>shard</th><th>parents</th><th>state</th><th>owner</th><th>iterator age</th><th>age, last 5 min <span class="axis">(0 – {{msf .AgeTop}}, one scale)</span></th><th>checkpoint</th><th>retrying batch</th><th>last error</th><th>sent to destination</th></tr></thead>
<tbody>
{{range .Rows}}<tr data-shard="{{.ShardID}}" data-state="{{display .ShardView}}">
<td><code>{{.ShardID}}</code></td><td>{{range .Parents}}<code>{{short .}}</code> {{end}}</td><td class="state-{{display .ShardView}}">{{display .ShardView}}{{if .BlockedSince}} since {{clock .BlockedSince}}{{end}}</td><td>{{.Owner}}</td>
<td>{{ms .IteratorAgeMillis}}</td>
<td>{{if .Spark}}<svg width="{{sparkW}}" height="{{sparkH}}" viewBox="0 0 {{sparkW}} {{sparkH}}"><polyline class="spark" points="{{.Spark}}"/></svg>{{end}}</td>
<td><code class="seq">{{.Checkpoint}}</code>{{if .CheckpointAt}} <span class="axis">{{clock .CheckpointAt}}</span>{{end}}</td>
<td>{{if .RetryingFirst}}<code class="seq">{{.RetryingFirst}}</code>{{if ne .RetryingFirst .RetryingLast}} … <code class="seq">{{.RetryingLast}}</code>{{end}}{{if .Attempts}} ({{.Attempts}} attempts){{end}}{{end}}{{with .SkipPending}} <span class="skipping" data-skip-pending="{{.}}">skip under way: <code class="seq">{{.}}</code></span>{{end}}{{with .LastSkip}} <span class="skipped" data-skipped-first="{{.First}}" data-skipped-last="{{.Last}}">skipped by an operator at {{clock .At}}: <code class="seq">{{.First}}</code>{{if ne .First .Last}} … <code class="seq">{{.Last}}</code>{{end}}, {{.Records}} records {{if .Destination}}sent to {{.Destination}}{{else}}dropped{{end}}</span>{{end}}</td>
<td class="err">{{.LastError}}{{if .LastErrorAt}} <span class="axis">{{clock .LastErrorAt}}</span>{{end}}</td><td>{{if or .Delivered .Dropped}}{{.Delivered}}{{if .Dropped}} ({{.Dropped}} dropped){{end}}{{end}}</td>
</tr>
{{end}}</tbody>
</table>
<p class="rows">{{len .Rows}} of {{.Matching}} matching shards shown.{{if lt (len .Rows) .Matching}} <a href="{{withRows $q "all"}}">Show all</a>.{{end}}</p>
</section>
{{end}}
{{end}}`))

// Handler serves the page at PathPage (?part=content: its content alone, which the script
// fetches; ?state=, ?owner=, ?sort=, ?rows= filter and order the table) and the state as JSON at
// PathState (?scope=worker: this worker's shards alone, which the other workers' pages fetch).
func (b *Board) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPage, func(w http.ResponseWriter, r *http.Request) {
		name := "page"
		if r.URL.Query().Get("part") == "content" {
			name = "content"
		}
		var buf bytes.Buffer
		if err := page.ExecuteTemplate(&buf, name, present(b.Fleet(r.Context()), parseQuery(r.URL.Query()))); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes())
	})
	mux.HandleFunc("GET "+PathState, func(w http.ResponseWriter, r *http.Request) {
		st := b.Snapshot()
		if r.URL.Query().Get("scope") != ScopeWorker {
			st = b.Fleet(r.Context())
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Add("Vary", "Accept-Encoding")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			_ = json.NewEncoder(w).Encode(st)
			return
		}
		// 1,000 shards with their checkpoints are about 185 KB of JSON, 13 KB compressed.
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_ = json.NewEncoder(zw).Encode(st)
		_ = zw.Close()
	})
	return mux
}
