package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strconv"
)

//go:embed assets/stem.css assets/stem.js assets/stem.svg
var assetFiles embed.FS

// asset is an embedded file as served: its bytes, type and content hash.
type asset struct {
	name  string
	ctype string
	body  []byte
	hash  string
}

var (
	cssAsset  = loadAsset("stem.css", "text/css; charset=utf-8")
	jsAsset   = loadAsset("stem.js", "text/javascript; charset=utf-8")
	iconAsset = loadAsset("stem.svg", "image/svg+xml")
	assets    = map[string]*asset{cssAsset.name: cssAsset, jsAsset.name: jsAsset, iconAsset.name: iconAsset}
)

func loadAsset(name, ctype string) *asset {
	b, err := assetFiles.ReadFile("assets/" + name)
	if err != nil {
		panic("ui: embedded asset " + name + ": " + err.Error())
	}
	sum := sha256.Sum256(b)
	return &asset{name: name, ctype: ctype, body: b, hash: hex.EncodeToString(sum[:8])}
}

// versioned is the asset's URL below assets/: its name with its hash, so
// a page names this build's file and a browser may keep it for good.
func (a *asset) versioned() string { return a.name + "?v=" + a.hash }

// asset serves an embedded file. Requested with this build's hash it may
// be cached for a year; otherwise it is revalidated by its ETag.
func (h *handler) asset(w http.ResponseWriter, r *http.Request) {
	a := assets[r.PathValue("name")]
	if a == nil {
		h.page(h.notFound)(w, r)
		return
	}
	etag := `"` + a.hash + `"`
	hd := w.Header()
	hd.Set("ETag", etag)
	if r.URL.Query().Get("v") == a.hash {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", a.ctype)
	hd.Set("Content-Length", strconv.Itoa(len(a.body)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(a.body)
}
