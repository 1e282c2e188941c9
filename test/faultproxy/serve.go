package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// serve forwards one request, with the fault pick chose, if any.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			status(w, http.StatusBadRequest, "BadRequest", "faultproxy: reading the request: "+err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	if isWatch(r) && p.resumeGone(r) {
		gone(w)
		return
	}
	f, ok := p.pick(r, body)
	if !ok {
		p.upstream.ServeHTTP(w, r)
		return
	}
	switch f.Kind {
	case Throttle:
		w.Header().Set("Retry-After", "1")
		status(w, http.StatusTooManyRequests, "TooManyRequests", "faultproxy: throttled, retry in 1s")
	case Latency:
		select {
		case <-r.Context().Done():
			return
		case <-time.After(f.Delay):
		}
		p.upstream.ServeHTTP(w, r)
	case CommitThen504:
		p.upstream.ServeHTTP(httptest.NewRecorder(), r)
		status(w, http.StatusGatewayTimeout, "Timeout", "faultproxy: the request was committed and its answer lost")
	case CommitThenDrop:
		p.upstream.ServeHTTP(httptest.NewRecorder(), r)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		status(w, http.StatusBadGateway, "InternalError", "faultproxy: the request was committed and its connection lost")
	case CutWatch:
		ctx, cancel := context.WithTimeout(r.Context(), f.After)
		defer cancel()
		// Deferred: the reverse proxy aborts the handler (panics with
		// http.ErrAbortHandler) when the cut stream's copy fails.
		defer func() {
			p.mu.Lock()
			p.gone[r.URL.Path] = true
			p.mu.Unlock()
		}()
		p.upstream.ServeHTTP(w, r.WithContext(ctx))
	}
}

// resumeGone reports, once per cut stream, that a watch resuming it from
// a resourceVersion must be told the version is gone.
func (p *Proxy) resumeGone(r *http.Request) bool {
	rv := r.URL.Query().Get("resourceVersion")
	if rv == "" || rv == "0" {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.gone[r.URL.Path] {
		return false
	}
	delete(p.gone, r.URL.Path)
	return true
}

// gone answers a watch with the ERROR event the API server sends when the
// requested resourceVersion has been compacted.
func gone(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "ERROR",
		"object": map[string]any{
			"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": http.StatusGone,
			"reason": "Expired", "message": "faultproxy: too old resource version",
		},
	})
}

func isWatch(r *http.Request) bool {
	return r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true"
}

// WorkloadStatusWrite matches writes of a Workload's status, e.g. the
// admission of a Workload.
func WorkloadStatusWrite(r *http.Request, _ []byte) bool {
	return (r.Method == http.MethodPatch || r.Method == http.MethodPut) &&
		strings.Contains(r.URL.Path, "/workloads/") && strings.HasSuffix(r.URL.Path, "/status")
}

// Writes matches every write.
func Writes(r *http.Request, _ []byte) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func pemCertificate(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
