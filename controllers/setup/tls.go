package setup

import "crypto/tls"

// HTTP1Only makes a TLS server offer HTTP/1.1 alone. berth's webhook server
// uses it: HTTP/2's stream multiplexing has had denial-of-service flaws of
// its own (rapid reset, CVE-2023-44487; CONTINUATION floods), the API server
// calls webhooks over HTTP/1.1 as readily, and with one request per
// connection at a time it opens as many connections as it has calls in
// flight, which a Service spreads over every replica; over HTTP/2 it would
// multiplex them all onto one connection to one replica.
func HTTP1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}
