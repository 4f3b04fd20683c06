// Command coredns is CoreDNS with the plugins a Kubernetes cluster DNS needs, nothing else
// (the full build links every cloud provider's SDK and takes several times as long): those
// kubeadm's Corefile names (prometheus included, for kind's clusters) and the bed's hosts.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/caddy/onevent"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The plugins in the order CoreDNS's own plugin.cfg runs them.
var directives = []string{
	"reload", "ready", "health", "prometheus", "errors", "log", "loadbalance", "cache", "hosts",
	"kubernetes", "loop", "forward",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
