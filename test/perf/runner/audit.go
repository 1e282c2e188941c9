package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy makes the API server log, at Metadata level and once per
// request (when the response is complete), every request of one user and
// nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  users: [%q]
- level: None
`

// auditFiles writes the policy into dir and returns the kube-apiserver
// flags that turn auditing on, and the path of the log. The batch backend
// keeps writing the log off the request path.
func auditFiles(dir, user string) ([]string, string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf(auditPolicy, user)), 0o600); err != nil {
		return nil, "", fmt.Errorf("writing audit policy: %w", err)
	}
	log := filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + log,
		"--audit-log-format=json",
		"--audit-log-mode=batch",
		"--audit-log-batch-max-wait=1s",
	}, log, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event the runner reads.
type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// AuditCounts are one user's API requests as the API server saw them.
type AuditCounts struct {
	// ByRequest counts requests by "verb resource[/subresource]", e.g.
	// "patch workloads/status".
	ByRequest map[string]int
	// Conflicts counts requests answered 409 Conflict.
	Conflicts int
	// Errors counts other answers of 400 and above.
	Errors int
}

// readAudit counts user's requests received in [from, to) in the log.
func readAudit(path, user string, from, to time.Time) (AuditCounts, error) {
	out := AuditCounts{ByRequest: map[string]int{}}
	f, err := os.Open(path)
	if err != nil {
		return out, fmt.Errorf("opening audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return out, fmt.Errorf("parsing audit log: %w", err)
		}
		if e.User.Username != user || e.RequestReceivedTimestamp.Before(from) || !e.RequestReceivedTimestamp.Before(to) {
			continue
		}
		what := e.Verb
		if e.ObjectRef != nil {
			what += " " + e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				what += "/" + e.ObjectRef.Subresource
			}
		}
		out.ByRequest[what]++
		if e.ResponseStatus != nil {
			switch code := e.ResponseStatus.Code; {
			case code == 409:
				out.Conflicts++
			case code >= 400:
				out.Errors++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("reading audit log: %w", err)
	}
	return out, nil
}

// isWrite reports whether an audit verb changes state.
func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection", "apply":
		return true
	}
	return false
}
