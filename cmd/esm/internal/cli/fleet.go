package cli

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/kinesis-esm/esm/lease"
	"github.com/kinesis-esm/esm/metrics/live"
)

// leasePeers lists the workers of a lease table with the status addresses they publish, for the
// live page's fleet view: one eventually consistent roster read per call (the page calls it at
// most every live.FleetRefresh, only while it is viewed), and each new epoch's bound item once.
func leasePeers(api lease.DynamoAPI, table string) live.PeerSource {
	r := lease.NewWorkerReader(api, table)
	var mu sync.Mutex
	return func(ctx context.Context) ([]live.Peer, error) {
		mu.Lock()
		defer mu.Unlock()
		ws, err := r.Workers(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]live.Peer, 0, len(ws))
		for _, w := range ws {
			out = append(out, live.Peer{ID: w.ID, Addr: w.Addr})
		}
		return out, nil
	}
}

// peerClient fetches the other workers' state.
var peerClient = &http.Client{Timeout: live.PeerTimeout}

// advertised is where the other workers reach this one's page, bound at a: its address, with
// this host's name for an unspecified IP (0.0.0.0, ::).
func advertised(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if !tcp.IP.IsUnspecified() {
		return tcp.String()
	}
	host, err := os.Hostname()
	if err != nil {
		return tcp.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
